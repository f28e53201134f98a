"""The OmniGen2 backend at its real shape on an NVIDIA GPU: random weights, the product's loading code.

    PYTHONPATH=.og2:src python bench/omnigen2_gpu.py --work /tmp/og2 --out results.jsonl

Builds OmniGen2's pipeline once from its architecture values (transformer: options/ft.yml `arch_opt` at the pinned
commit; MLLM: Qwen2.5-VL-3B-Instruct's config.json; VAE: FLUX.1's AutoencoderKL config), random bf16 weights
(memory and time do not depend on the values), saves it with save_pretrained, then in one process per
configuration loads it with `fourloops.generate.load_backend` (bf16, nf4: the product path) and makes one
512 x 512 view at 28 steps for 1, 2 and 3 reference images, recording per reference count the peak VRAM
(torch allocator after a reset, and NVML device use minus the process's baseline) and the seconds a view.
`--variants` adds the NF4 question: the transformer and the MLLM each at plain NF4 and with double quantisation,
loaded directly through bitsandbytes (weights allocated only), to see which reproduces the desk's 4.33 GiB.
The tokenizer is the smoke set's byte-level one (the real one is not on this machine): a prompt has ~4x the real
token count (~150 tokens instead of ~40); its memory effect is a few MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# The architecture values the sizing set builds from (config/architectures/, each file citing its source: OmniGen2's
# options/ft.yml arch_opt, Qwen2.5-VL-3B-Instruct's and FLUX.1's config.json). Built here with the classes' own
# init (fourloops.sizing.instantiate also randomises the zero-initialised layers; these records predate that).
def _arch(name: str) -> dict:
    from fourloops.sizing import architecture

    return dict(architecture(name)["config"])


CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
PROMPT = "The same person in the same pose, seen from a camera orbited to 90 degrees around them."


def gib(n: float) -> float:
    return round(n / 2**30, 3)


def nvml_used() -> float | None:
    from fourloops.stages.probe import nvml_reading

    return (nvml_reading(0) or {}).get("device_used_gib")


def apparatus() -> dict:
    import torch

    from fourloops import provenance

    return {"gpu": provenance.gpu_info(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "packages": provenance.package_versions(), "invocation": " ".join(sys.argv),
            "method": "torch.cuda.max_memory_allocated after reset_peak_memory_stats (weights resident); "
                      "NVML device used minus this process's baseline before CUDA init (adds the CUDA context)"}


def build(work: Path) -> dict:
    import torch
    from diffusers import AutoencoderKL
    from transformers import (Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2VLImageProcessor,
                              Qwen2VLProcessor, Qwen2VLVideoProcessor)

    from fourloops.loading import _import_omnigen2
    from fourloops.smoke_generators import _tiny_qwen_tokenizer
    from omnigen2.schedulers.scheduling_flow_match_euler_discrete import FlowMatchEulerDiscreteScheduler

    OmniGen2Pipeline, Transformer = _import_omnigen2()
    tok, vocab = _tiny_qwen_tokenizer()
    tok.chat_template = CHAT
    ids = {"bos_token_id": vocab["<|endoftext|>"], "eos_token_id": vocab["<|im_end|>"],
           "pad_token_id": vocab["<|endoftext|>"]}
    mllm_arch = _arch("qwen2_5_vl_3b")
    cfg = Qwen2_5_VLConfig(text_config=mllm_arch["text_config"] | ids, vision_config=mllm_arch["vision_config"],
                           hidden_size=mllm_arch["text_config"]["hidden_size"], vocab_size=mllm_arch["vocab_size"],
                           tie_word_embeddings=mllm_arch["tie_word_embeddings"],
                           image_token_id=vocab["<|image_pad|>"], video_token_id=vocab["<|video_pad|>"],
                           vision_start_token_id=vocab["<|vision_start|>"],
                           vision_end_token_id=vocab["<|vision_end|>"], **ids)
    t0 = time.perf_counter()
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        transformer = Transformer(**_arch("omnigen2_transformer")).eval()
        mllm = Qwen2_5_VLForConditionalGeneration(cfg).eval()
        vae = AutoencoderKL(**_arch("flux_vae")).eval()
    torch.set_default_dtype(torch.float32)
    processor = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(), tokenizer=tok,
                                 video_processor=Qwen2VLVideoProcessor())
    pipe = OmniGen2Pipeline(transformer=transformer, vae=vae, scheduler=FlowMatchEulerDiscreteScheduler(),
                            mllm=mllm, processor=processor)
    params = {k: int(sum(p.numel() for p in m.parameters())) for k, m in
              (("transformer", transformer), ("mllm", mllm), ("vae", vae))}
    built = time.perf_counter() - t0
    pipe.save_pretrained(work, safe_serialization=True)
    return {"what": "build", "parameters": params, "build_seconds": round(built, 1),
            "save_seconds": round(time.perf_counter() - t0 - built, 1),
            "bytes_on_disk": sum(f.stat().st_size for f in work.rglob("*") if f.is_file())}


def run(work: Path, precision: str, refs: list[int], steps: int, size: int) -> dict:
    base = nvml_used()
    import torch
    from PIL import Image

    from fourloops.generate import load_backend

    t0 = time.perf_counter()
    g = load_backend("omnigen2", str(work), None, precision, "cuda",
                     {"num_inference_steps": steps, "guidance": 4.0, "width": size, "height": size,
                      "negative_prompt": None})
    torch.cuda.synchronize()
    load_s = time.perf_counter() - t0
    weights = torch.cuda.memory_allocated()
    images = [Image.new("RGB", (size, size), c) for c in ("white", "gray", "black")]
    g.settings["num_inference_steps"] = 1
    g.generate(images[:1], PROMPT, seed=0)  # warm-up: kernels, autotune
    g.settings["num_inference_steps"] = steps
    out = {"what": "generate", "backend": "omnigen2", "precision": precision, "size": size, "steps": steps,
           "load_seconds": round(load_s, 2), "weights_gib": gib(weights), "by_references": {}}
    for n in refs:
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        g.generate(images[:n], PROMPT, seed=0)
        torch.cuda.synchronize()
        used = nvml_used()
        out["by_references"][str(n)] = {
            "seconds_per_view": round(time.perf_counter() - t1, 2),
            "peak_gib": gib(torch.cuda.max_memory_allocated()),
            "nvml_process_gib": None if used is None or base is None else round(used - base, 3),
        }
        print(json.dumps({n: out["by_references"][str(n)]}), flush=True)
    out["apparatus"] = apparatus()
    return out


def variant(work: Path, component: str, double: bool) -> dict:
    import torch
    from transformers import BitsAndBytesConfig as TBnb, Qwen2_5_VLForConditionalGeneration
    from diffusers import BitsAndBytesConfig as DBnb

    from fourloops.loading import _import_omnigen2

    kw = dict(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16,
              bnb_4bit_use_double_quant=double)
    t0 = time.perf_counter()
    if component == "transformer":
        _, Transformer = _import_omnigen2()
        m = Transformer.from_pretrained(str(work), subfolder="transformer", quantization_config=DBnb(**kw),
                                        dtype=torch.bfloat16, local_files_only=True)
    else:
        m = Qwen2_5_VLForConditionalGeneration.from_pretrained(str(work / "mllm"), quantization_config=TBnb(**kw),
                                                               dtype=torch.bfloat16, local_files_only=True,
                                                               device_map="cuda")
    m.to("cuda") if component == "transformer" else None
    torch.cuda.synchronize()
    return {"what": "nf4_weights", "component": component, "double_quant": double,
            "allocated_gib": gib(torch.cuda.memory_allocated()), "load_seconds": round(time.perf_counter() - t0, 1)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--precisions", default="bf16,nf4")
    ap.add_argument("--refs", default="1,2,3")
    ap.add_argument("--steps", type=int, default=28)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # child: one configuration as JSON
    a = ap.parse_args()
    if a.one:
        spec = json.loads(a.one)
        rec = run(a.work, spec["precision"], spec["refs"], a.steps, a.size) if spec["kind"] == "generate" else \
            variant(a.work, spec["component"], spec["double"])
        with a.out.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        return 0
    if not (a.work / "model_index.json").exists():
        a.work.mkdir(parents=True, exist_ok=True)
        rec = build(a.work)
        print(json.dumps(rec), flush=True)
        with a.out.open("a") as f:
            f.write(json.dumps(rec) + "\n")
    specs = [{"kind": "generate", "precision": p, "refs": [int(r) for r in a.refs.split(",")]}
             for p in a.precisions.split(",")]
    if a.variants:
        specs += [{"kind": "variant", "component": c, "double": d} for c in ("transformer", "mllm") for d in (False, True)]
    for spec in specs:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, "--work", str(a.work), "--out", str(a.out), "--steps",
                               str(a.steps), "--size", str(a.size), "--one", json.dumps(spec)],
                              capture_output=True, text=True)
        if proc.returncode:
            rec = {"what": "failed", "spec": spec, "rc": proc.returncode, "stderr_tail": proc.stderr[-3000:]}
            with a.out.open("a") as f:
                f.write(json.dumps(rec) + "\n")
        print(json.dumps({"spec": spec, "rc": proc.returncode, "seconds": round(time.perf_counter() - t0, 1)}),
              proc.stdout[-2000:], proc.stderr[-1500:] if proc.returncode else "", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
