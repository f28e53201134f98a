"""rules/render.smk: the renders' camera, which the fit and the LoRA's records read too."""

from __future__ import annotations

LINEAGE = False  # a job's params, not its code: a change shows in them


def camera_settings(config: dict) -> dict:
    return dict(config["render"]["camera"], image_size=config["render"]["image_size"])
