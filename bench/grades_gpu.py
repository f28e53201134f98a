"""The real scoring code path at full size on an NVIDIA GPU: random weights at the Qwen3-VL-8B-Instruct shape.

    PYTHONPATH=src python bench/grades_gpu.py --prompts prompts.json --work /tmp/q3 [--out grades_gpu.json]

A Qwen3-VL built from the 8B's config (random bf16 weights: memory and time do not depend on the values) and a
LoRA adapter over its language model are written with save_pretrained, then loaded by `fourloops.scorer.load_scorer`
at each precision and asked EditScore's SC question (render + restyled, 512 x 512 each) and PQ question (restyled).
Prints peak VRAM (torch) against the wall check's ask, and the encode/decode split. The tokenizer is the smoke set's
byte-level one (the real one is not on this machine), so a prompt has ~4x the real token count: prefill is slower
than the real model's by that much text; image tokens are the real count. The EditScore adapter's rank and targets
are not known offline: r=16 on the attention and MLP projections is ASSUMED (~40 M parameters, <0.1 GiB at bf16).
`prompts.json`: {"sc": ..., "pq": ...} from `fourloops.grading.prompts(25)` (editscore is not on the GPU machine);
bench/grades_gpu_env.sh makes it and the wheels the lent H200 lacks.
Measure one precision per process (`--precisions bf16`): after an NF4 run in the same process 4.2 GiB stayed
allocated and a following bf16 run read 20.49 GiB of weights instead of 16.51 (H200, 2026-12-01; both records are in
bench/results/).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

# Qwen/Qwen3-VL-8B-Instruct config.json (model card); the parameter count is checked against models.yaml below.
TEXT = {"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 262144,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [24, 20, 20],
                            "mrope_interleaved": True}}
VISION = {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "out_hidden_size": 4096,
          "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "num_position_embeddings": 2304,
          "deepstack_visual_indexes": [8, 16, 24]}


def build(work: Path) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import (Qwen2VLImageProcessor, Qwen3VLConfig, Qwen3VLForConditionalGeneration,
                              Qwen3VLProcessor, Qwen3VLVideoProcessor)

    from fourloops.smoke_generators import _tiny_qwen_tokenizer
    from fourloops.smoke_scorer import CHAT_TEMPLATE

    tok, vocab = _tiny_qwen_tokenizer()
    ids = {"bos_token_id": vocab["<|endoftext|>"], "eos_token_id": vocab["<|im_end|>"],
           "pad_token_id": vocab["<|endoftext|>"]}
    cfg = Qwen3VLConfig(text_config=TEXT | ids, vision_config=VISION, tie_word_embeddings=False,
                        image_token_id=vocab["<|image_pad|>"], video_token_id=vocab["<|video_pad|>"],
                        vision_start_token_id=vocab["<|vision_start|>"], vision_end_token_id=vocab["<|vision_end|>"])
    t0 = time.perf_counter()
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = Qwen3VLForConditionalGeneration(cfg).eval()
    torch.set_default_dtype(torch.float32)
    params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(work / "base")
    Qwen3VLProcessor(image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2,
                                                           min_pixels=512 * 512, max_pixels=512 * 512),
                     tokenizer=tok, video_processor=Qwen3VLVideoProcessor(),
                     chat_template=CHAT_TEMPLATE).save_pretrained(work / "base")
    lora = LoraConfig(r=16, lora_alpha=32, init_lora_weights=False,
                      target_modules=r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)")
    peft_model = get_peft_model(model, lora)
    lora_params = sum(p.numel() for n, p in peft_model.named_parameters() if "lora_" in n)
    peft_model.save_pretrained(work / "adapter")
    del peft_model, model
    torch.cuda.empty_cache()
    return {"parameters": params, "lora_parameters": lora_params, "build_seconds": round(time.perf_counter() - t0, 1)}


def measure(work: Path, precision: str, prompts: dict, max_new_tokens: int) -> dict:
    import numpy as np
    import torch
    from PIL import Image

    from fourloops import asks, scorer as sc

    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    spec = sc.ScorerSpec(str(work / "base"), None, str(work / "adapter"), None, precision, "cuda",
                         max_new_tokens=max_new_tokens)
    t0 = time.perf_counter()
    scorer = sc.load_scorer(spec)
    torch.cuda.synchronize()
    load = time.perf_counter() - t0
    weights = torch.cuda.memory_allocated() / 2**30
    rng = np.random.default_rng(0)
    render, restyled = (Image.fromarray(rng.integers(0, 255, (512, 512, 3), dtype=np.uint8)) for _ in range(2))
    scorer.answer([render, restyled], "warm up", 0)  # kernels and caches, not counted
    out = {"precision": precision, "load_seconds": round(load, 1), "weights_gib": round(weights, 3)}
    for name, images, prompt in (("sc", [render, restyled], prompts["sc"]), ("pq", [restyled], prompts["pq"])):
        torch.cuda.reset_peak_memory_stats()
        a = scorer.answer(images, prompt, 42)
        out[name] = {"prompt_tokens": a.prompt_tokens, "generated_tokens": a.generated_tokens,
                     "encode_seconds": round(a.encode_seconds, 4), "decode_seconds": round(a.decode_seconds, 4),
                     "decode_seconds_per_token": round(a.decode_seconds / max(1, a.generated_tokens - 1), 5),
                     "peak_vram_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3)}
    try:  # the wall check's figures (models.yaml through its schema: jsonschema may be missing here)
        facts = asks.load_facts(Path(__file__).resolve().parents[1] / "config" / "models.yaml")
        ask = asks.scorer_ask(facts, {"precision": precision, "device": "cuda"}, n_views=1)
        est, parts = asks.estimate_vram_gib(facts, "qwen3_vl_8b", precision=precision, resolution=512)
        out["ask_vram_gib"] = {"value": round(ask.vram.value, 3), "source": ask.vram.source}
        out["estimate_vram_gib_without_context"] = {"value": round(est, 3),
                                                     "parts": {k: round(v, 3) for k, v in parts.items()}}
    except ImportError as err:
        out["ask_vram_gib"] = f"not computed here: {err}"
    del scorer
    return out


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--precisions", default="nf4,bf16")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    prompts = json.loads(Path(args.prompts).read_text())
    import transformers, peft, bitsandbytes  # noqa: E401

    doc = {"command": "PYTHONPATH=src python bench/grades_gpu.py " + " ".join(
               f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if v is not None),
           "machine": {"node": platform.node(), "python": platform.python_version(), "torch": torch.__version__,
                       "transformers": transformers.__version__, "peft": peft.__version__,
                       "bitsandbytes": bitsandbytes.__version__, "gpu": torch.cuda.get_device_name(0)},
           "build": build(work), "runs": []}
    for precision in args.precisions.split(","):
        doc["runs"].append(measure(work, precision, prompts, args.max_new_tokens))
        print(json.dumps(doc["runs"][-1]), flush=True)
    text = json.dumps(doc, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
