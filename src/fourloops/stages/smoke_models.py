"""The smoke model set: tiny models built from configs with fixed seeds, no download (desk, CPU).

Saved the way real weights are (save_pretrained / rfdetr checkpoints) and loaded through the same code."""

from __future__ import annotations


# Random heads start at zero in RF-DETR (all 17 points on the box centre); a small spread gives the fit
# something to work on. 1 decoder layer and 10 queries keep the CPU cost ~0.5 s an image at 192 px.
SMOKE_DETECTOR_SHRINK = {"dec_layers": 1, "num_queries": 10, "head_init_std": 0.02}


def smoke_generator_stage(backend: str, out_dir: str, seed: int) -> dict:
    from fourloops.smoke_generators import build_smoke_generator

    info = build_smoke_generator(backend, out_dir, int(seed))
    return {"seed": int(seed), "precision": "fp32", "smoke_model": info}


def smoke_detector_stage(out_path: str, seed: int, resolution: int) -> dict:
    from fourloops.keypoints import build_smoke_detector

    info = build_smoke_detector(out_path, int(seed), resolution=int(resolution), **SMOKE_DETECTOR_SHRINK)
    return {"seed": int(seed), "precision": "fp32", "smoke_model": info}
