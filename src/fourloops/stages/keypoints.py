"""RF-DETR keypoints (COCO-17) on every image of a set, one model load per set (desk)."""

from __future__ import annotations

import time

from fourloops import determinism
from fourloops.card import check_card
from fourloops.io import write_json


def keypoints_stage(
    images: list[str], points_out: list[str], azimuths: list[int], detector: dict, machine: str = "desk"
) -> dict:
    """The most confident person's COCO-17 keypoints in every image of a set, one model load."""
    determinism.apply(None)  # the detector draws nothing
    from PIL import Image

    from fourloops.keypoints import load_detector

    if not (len(images) == len(points_out) == len(azimuths)):
        raise ValueError(f"{len(images)} images, {len(points_out)} outputs, {len(azimuths)} azimuths")
    check_card(detector["device"], machine)
    det = load_detector(
        detector["weights"], device=detector["device"], resolution=int(detector["resolution"]),
        num_windows=int(detector["num_windows"]),
    )
    seconds = []
    for azimuth, image, out in zip(azimuths, images, points_out):
        t0 = time.perf_counter()
        with Image.open(image) as im:
            record = det.detect(im.convert("RGB"))
        seconds.append(round(time.perf_counter() - t0, 4))
        record.update(image=str(image), azimuth_requested=int(azimuth))
        write_json(out, record)
    # where the job's seconds went (a forecast's parts: the load, then each image, the first with its warm-up)
    return {"models": [det.describe()], "precision": "fp32",
            "timing": {"load_seconds": round(det.load_seconds, 4), "image_seconds": seconds}}
