"""A LoRA step at the real OmniGen2 shape on an NVIDIA GPU, through fourloops.lora (the lora_train job's code).

    PYTHONPATH=.og2:src python bench/lora_gpu.py --work /tmp/lora --out lora_gpu.jsonl

Builds the sizing OmniGen2 (fourloops.sizing: the real architecture, random bf16 weights) once, writes a few
training records from random images at the resolution, computes their embeddings with the generator's own text
encoder (fourloops.lora_embeddings.compute_embeddings, its own process), then trains a few steps per configuration, each in
its own process: frozen dtype (bf16 | fp32 under bf16 autocast), the text encoder precomputed or resident on the
card (the seeds' setup), 256 and 512 px; rank 8 on to_q/to_k/to_v/to_out.0, 8-bit AdamW, gradient checkpointing,
batch 1. Records per configuration: torch's peak allocated and reserved over the whole job (load, VAE encode and
steps), NVML for the process, seconds per optimizer step (steps after the first), load seconds. Random weights:
memory and time do not depend on the values.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
TARGETS = ["to_q", "to_k", "to_v", "to_out.0"]
CONFIGS = [("bf16", "precomputed", 256), ("bf16", "precomputed", 512), ("bf16", "resident", 256),
           ("bf16", "resident", 512), ("fp32", "precomputed", 512), ("fp32", "resident", 512)]


def nvml_process_gib() -> float | None:
    from fourloops.stages.probe import nvml_reading

    return (nvml_reading(0) or {}).get("process_gib")


def prepare(work: Path, resolutions: list[int]) -> dict:
    import numpy as np
    from PIL import Image

    from fourloops import lora_embeddings, lora_records, sizing

    model = work / "models" / "omnigen2"
    built = None if (model / "model_index.json").exists() else sizing.build("omnigen2", model, "cuda")
    rng = np.random.default_rng(0)
    out = {"build": built, "records": {}}
    for res in resolutions:
        image_of = {}
        for az in (0, 90, 180, 270):
            p = work / f"img-{res}-{az:03d}.png"
            Image.fromarray(rng.integers(0, 255, (res, res, 3), dtype=np.uint8)).save(p)
            image_of[az] = str(p)
        records = lora_records.make_records(lora_records.azimuth_pairs([0, 90, 180, 270], 4, 0),
                                    "The same person, seen from {azimuth} degrees.", image_of)
        rp = work / f"records-{res}.jsonl"
        lora_records.write_records(str(rp), records)
        ep = work / f"embeddings-{res}.safetensors"
        t0 = time.perf_counter()
        prov = lora_embeddings.compute_embeddings("omnigen2", str(model), None, "bf16", "cuda", records, str(ep))
        out["records"][res] = {"records": str(rp), "embeddings": str(ep), "embed_seconds": round(time.perf_counter() - t0, 2),
                               "components_loaded": prov.get("components_loaded")}
    return out


def one(work: Path, frozen: str, te: str, res: int, steps: int) -> dict:
    import pandas as pd
    import torch

    from fourloops import lora

    spec = lora.TrainSpec.of(backend="omnigen2", model=str(work / "models" / "omnigen2"), revision=None,
                             model_set="sizing", rank=8, alpha=8.0, dropout=0.0, target_modules=TARGETS, steps=steps,
                             lr=1e-4, weight_decay=0.0, max_grad_norm=1.0, resolution=res, accumulation=1,
                             frozen_dtype=frozen, text_encoder=te, device="cuda", seed=0, checkpoint_every=10_000)
    tag = f"{frozen}-{te}-{res}"
    t0 = time.perf_counter()
    prov = lora.train(spec, str(work / f"records-{res}.jsonl"), str(work / f"embeddings-{res}.safetensors"),
                      str(work / f"lora-{tag}.safetensors"), str(work / f"loss-{tag}.csv"),
                      str(work / f"loss-{tag}.png"), str(work / f"ckpt-{tag}"))
    torch.cuda.synchronize()
    secs = pd.read_csv(work / f"loss-{tag}.csv")["seconds"].tolist()
    from fourloops import provenance

    return {"what": "lora_step", "backend": "omnigen2", "frozen_dtype": frozen, "text_encoder": te, "resolution": res,
            "key": f"lora_step/omnigen2/{frozen}/{'transformer+text_encoder' if te == 'resident' else 'transformer'}/{res}",
            "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3),
            "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 3),
            "nvml_process_gib": nvml_process_gib(), "first_step_seconds": secs[0],
            "seconds_per_step": round(sum(secs[1:]) / max(1, len(secs) - 1), 3), "steps": steps,
            "load_seconds": prov["load_seconds"], "job_seconds": round(time.perf_counter() - t0, 2),
            "optimizer": prov["optimizer"], "gradient_checkpointing": prov["gradient_checkpointing"],
            "autocast": prov["autocast"], "components_loaded": prov["components_loaded"],
            "census": prov["census"], "gpu": provenance.gpu_info(), "torch": torch.__version__,
            "invocation": " ".join(sys.argv)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--timeout", type=int, default=180)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        frozen, te, res = json.loads(a.one)
        rec = one(a.work, frozen, te, int(res), a.steps)
        with a.out.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps({k: rec[k] for k in ("key", "peak_gib", "peak_reserved_gib", "nvml_process_gib",
                                                "seconds_per_step", "load_seconds")}), flush=True)
        return 0
    a.work.mkdir(parents=True, exist_ok=True)
    prep = prepare(a.work, sorted({c[2] for c in CONFIGS}))
    with a.out.open("a") as f:
        f.write(json.dumps({"what": "prepare", **prep}, default=str) + "\n")
    print(json.dumps(prep, default=str)[:800], flush=True)
    for cfg in CONFIGS:
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, __file__, "--work", str(a.work), "--out", str(a.out), "--steps",
                                   str(a.steps), "--one", json.dumps(cfg)], capture_output=True, text=True,
                                  timeout=a.timeout)
            rc, tail = proc.returncode, (proc.stdout[-600:] + ("" if proc.returncode == 0 else proc.stderr[-2500:]))
        except subprocess.TimeoutExpired:
            rc, tail = "timeout", ""
        if rc != 0:
            with a.out.open("a") as f:
                f.write(json.dumps({"what": "failed", "config": cfg, "rc": rc, "tail": tail}) + "\n")
        print(cfg, rc, round(time.perf_counter() - t0, 1), tail, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
