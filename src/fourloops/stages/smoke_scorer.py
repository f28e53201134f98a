"""The smoke set's scorer: a tiny Qwen3-VL and a tiny LoRA adapter, built from configs with a fixed seed (desk, CPU)."""

from __future__ import annotations


def smoke_scorer_stage(out_dir: str, seed: int) -> dict:
    from fourloops.smoke_scorer import build_smoke_scorer

    info = build_smoke_scorer(out_dir, int(seed))
    return {"seed": int(seed), "precision": "fp32", "smoke_model": info}
