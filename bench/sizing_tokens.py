"""The sizing set's tokenizers against Qwen's own BPE: how many tokens each prompt the sizing models see would be
with the real tokenizer.

The sizing builds (`fourloops.sizing`) train a byte-level BPE in memory on the run's prompts and the pipelines'
templates, because no tokenizer is downloadable where they run. Qwen's real vocabulary ships inside the `dashscope`
package (`dashscope/resources/qwen.tiktoken`: 151,643 byte sequences with their merge ranks, the same BPE as the
Qwen2, Qwen2.5-VL and Qwen3-VL tokenizers). This bench reads it out of the dashscope wheel (nothing installed but
tiktoken, whose reader transformers' `TikTokenConverter` uses), builds the real tokenizer with that converter,
checks it against tiktoken's own encoder on every text, and counts every prompt both ways, built from the
config exactly as rules/sizing.smk builds the corpus:

- scorer: EditScore's SC prompt with each restyle instruction in it, and its PQ prompt (editscore package);
- qwen_image_edit_plus: diffusers' prompt template around each ladder prompt and restyle instruction;
- omnigen2: its pipeline's own chat layout around them (when OmniGen2's source is importable; else skipped, said).

Counts are of the text only (image tokens are the processors', the same both ways). Needs, beside the project's
.venv, what the project does not depend on:

    .venv/bin/pip install tiktoken==0.14.0
    .venv/bin/pip download dashscope==2.0.2 --no-deps -d /tmp/dashscope     # the wheel only, never installed
    .venv/bin/python bench/sizing_tokens.py --wheel /tmp/dashscope/dashscope-2.0.2-py3-none-any.whl \\
        --out bench/results/sizing-tokens-2026-12-04.txt
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

WHEEL_SHA256 = "0602d1800f7433bdb7953560986eaf5146454ed3988636c0a91963ba24e74258"  # dashscope-2.0.2, PyPI
VOCAB_MEMBER = "dashscope/resources/qwen.tiktoken"
# Qwen's pre-tokenizer (dashscope/tokenizers/qwen_tokenizer.py PAT_STR; transformers' Qwen2Tokenizer has the same)
PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def merged(paths: list[Path]) -> dict:
    """The config files merged in order (Snakemake's way), the schema's defaults filled in as the config check does."""
    from snakemake.utils import validate

    from fourloops.config import _merge, schema_with_slices

    out: dict = {}
    for p in paths:
        _merge(out, yaml.safe_load(Path(p).read_text()) or {})

    with tempfile.TemporaryDirectory() as tmp:
        schema = Path(tmp) / "schema.json"
        schema.write_text(json.dumps(schema_with_slices(REPO / "config" / "schema.yaml", REPO / "config" / "schema.d")))
        validate(out, str(schema), set_default=True)
    return out


def real_tokenizers(wheel: Path):
    """(transformers' Qwen2Tokenizer, tiktoken's Encoding), both from the wheel's qwen.tiktoken."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from transformers import Qwen2Tokenizer
    from transformers.convert_slow_tokenizer import TikTokenConverter

    from fourloops import sizing

    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise SystemExit(f"--wheel {wheel}: sha256 {digest}; allowed: dashscope-2.0.2's {WHEEL_SHA256}")
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as zf:
        path = Path(zf.extract(VOCAB_MEMBER, tmp))
        vocab_sha = hashlib.sha256(path.read_bytes()).hexdigest()
        ranks = load_tiktoken_bpe(str(path))
        vocab, merges = TikTokenConverter(str(path)).extract_vocab_merges_from_model(str(path))
    specials = {t: len(ranks) + i for i, t in enumerate(sizing.SPECIAL_TOKENS)}
    hf = Qwen2Tokenizer(vocab=vocab, merges=merges, unk_token=None, bos_token=None, eos_token=None, pad_token=None,
                        additional_special_tokens=list(specials))
    enc = tiktoken.Encoding("qwen", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    return hf, enc, {"vocab_sha256": vocab_sha, "ranks": len(ranks), "merges": len(merges),
                     "tiktoken": tiktoken.__version__}


def prompts_by_component(texts: list[str]) -> tuple[dict, dict, list[str]]:
    """component -> (the corpus its sizing tokenizer is trained on, the prompts its model sees), as the builders of
    fourloops.sizing make them; what was skipped, and notes for the record."""
    from fourloops import sizing

    out, skipped = {}, []
    extra, where = sizing.scorer_texts()
    notes = {"scorer_prompts": where, "scorer_questions": extra}
    if extra:
        sc, pq = extra
        out["scorer"] = (texts + extra, [sc.replace("<instruction>", t) for t in texts] + [pq])
    else:
        skipped.append(f"scorer: {where}")
    seen = sizing.qwen_image_prompts(texts)
    out["qwen_image_edit_plus"] = (texts + seen, seen)
    try:
        seen = sizing.omnigen2_prompts(texts)
    except Exception as exc:  # OmniGen2's source is not on PYTHONPATH here
        skipped.append(f"omnigen2: {exc}")
    else:
        out["omnigen2"] = (texts + seen, seen)
        notes["omnigen2"] = str(Path(sys.modules["omnigen2"].__file__).parent)
    return out, notes, skipped


def scorer_whole_prompts(hf, sized, questions: tuple[str, str], facts: dict,
                         styles: list[str]) -> tuple[list[str], list[dict]]:
    """EditScore's `questions` (SC, PQ) as the scorer's processor makes them (images at models.yaml's
    prompt_image_size, the chat layout, the instruction), counted with Qwen's BPE `hf`, the sizing tokenizer `sized`
    and the smoke set's byte-level one (the tokenizer of bench/grades_gpu.py's 2026-12-01 records, whose count
    models.yaml's prompt_tokens was)."""
    from PIL import Image

    from fourloops import sizing
    from fourloops.smoke_generators import _tiny_qwen_tokenizer

    size = int(facts["models"]["qwen3_vl_8b"]["prompt_image_size"])
    sc, pq = questions
    hf.chat_template = sizing.CHAT_TEMPLATE
    processors = {name: sizing.scorer_processor(tok)
                  for name, tok in (("real", hf), ("sizing", sized), ("smoke", _tiny_qwen_tokenizer()[0]))}
    image = Image.new("RGB", (size, size), (128, 128, 128))
    lines = [f"scorer, whole question at {size} px (Qwen's chat layout: sizing.CHAT_TEMPLATE; the images' tokens by "
             "the processor)", "question\tinstruction\timages\treal_tokens\tsizing_tokens\tsmoke_tokens"]
    rows = []
    # the SC question with no instruction in it: models.yaml's prompt_tokens; a job adds its instruction's bytes
    for question, prompt, n_images, instructions in (("SC", sc, 2, ["", *styles]), ("PQ", pq, 1, [None])):
        for instruction in instructions:
            text = prompt if instruction is None else prompt.replace("<instruction>", instruction)
            content = [{"type": "image"}] * n_images + [{"type": "text", "text": text}]
            counts = {}
            for name, proc in processors.items():
                chat = proc.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                add_generation_prompt=True)
                counts[name] = int(proc(text=[chat], images=[image] * n_images, return_tensors="pt")["input_ids"].shape[1])
            shown = "(none)" if instruction == "" else "-" if instruction is None else " ".join(instruction.split())[:40]
            lines.append(f"{question}\t{shown}\t{n_images}\t{counts['real']}\t{counts['sizing']}\t{counts['smoke']}")
            rows.append({"question": question, "instruction": instruction, "instruction_bytes":
                         None if instruction is None else len(instruction.encode()), "images": n_images,
                         "image_size": size, **{f"{k}_tokens": v for k, v in counts.items()}})
    return lines, rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", required=True, type=Path, help="dashscope-2.0.2-py3-none-any.whl (pip download)")
    ap.add_argument("--configfile", nargs="*", type=Path,
                    default=[REPO / "config" / "config.yaml"], help="config files, merged in order")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    from fourloops import sizing

    config = merged(args.configfile)
    texts = list(dict.fromkeys(sizing.corpus(config)))  # the corpus, each text once
    facts = yaml.safe_load((REPO / "config" / "models.yaml").read_text())
    hf, enc, about = real_tokenizers(args.wheel)
    by_comp, notes, skipped = prompts_by_component(texts)
    lines = [f"# {' '.join(['.venv/bin/python', *sys.argv])}",
             f"# python {platform.python_version()}, tiktoken {about['tiktoken']}, "
             f"qwen.tiktoken sha256 {about['vocab_sha256']} ({about['ranks']} ranks, {about['merges']} merges)",
             f"# config: {', '.join(str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p) for p in args.configfile)};"
             f" {len(texts)} distinct texts in the sizing corpus; scorer prompts: {notes['scorer_prompts']}"
             + (f"; OmniGen2 from {notes['omnigen2']} (PYTHONPATH)" if "omnigen2" in notes else ""),
             "component\tprompt\tbytes\tsizing_tokens\treal_tokens\tsizing/real"]
    summary, disagreements, trained = {}, 0, {}
    for comp, (train, seen) in by_comp.items():
        tok = trained[comp] = sizing.sized_tokenizer(train)
        ratios = []
        for text in seen:
            real = hf(text, add_special_tokens=False)["input_ids"]
            if real != enc.encode(text, allowed_special="all"):
                disagreements += 1
            ours = len(tok(text, add_special_tokens=False)["input_ids"])
            ratios.append(ours / len(real))
            label = " ".join(text.split())[:60]
            lines.append(f"{comp}\t{label}\t{len(text.encode())}\t{ours}\t{len(real)}\t{ours / len(real):.3f}")
        summary[comp] = {"prompts": len(seen), "min": round(min(ratios), 3), "median": round(statistics.median(ratios), 3),
                         "max": round(max(ratios), 3)}
    lines.append("")
    lines.append(f"real tokenizer (transformers' TikTokenConverter -> Qwen2Tokenizer) against tiktoken's encoder: "
                 f"{disagreements} of {sum(len(s) for _, s in by_comp.values())} prompts differ")
    for comp, s in summary.items():
        lines.append(f"{comp}: {s['prompts']} prompts, sizing/real tokens {s['min']:.3f}-{s['max']:.3f} "
                     f"(median {s['median']:.3f})")
    for s in skipped:
        lines.append(f"skipped {s}")
    whole = []
    if "scorer" in trained:
        whole_lines, whole = scorer_whole_prompts(hf, trained["scorer"], notes["scorer_questions"], facts,
                                                  list(config["restyle"]["styles"].values()))
        lines += ["", *whole_lines]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps({"summary": summary, "about": about,
                                                             "disagreements": disagreements,
                                                             "scorer_questions": whole, "command": lines[0][2:],
                                                             "skipped": skipped}, indent=1) + "\n")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
