"""RF-DETR keypoints (COCO-17) on every image of a set, one model load per set (desk)."""

from __future__ import annotations

import time

from fourloops import determinism
from fourloops.card import check_card
from fourloops.io import write_json


def keypoints_stage(
    images: list[str], points_out: list[str], azimuths: list[int], detector: dict, machine: str = "desk",
    batch: int = 1,
) -> dict:
    """The most confident person's COCO-17 keypoints in every image of a set, one model load, `batch` images a
    detector call (the job's resolved `keypoints.batch`; the first call is the largest, which the walls size)."""
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
    batch = max(1, int(batch))
    seconds = []
    for start in range(0, len(images), batch):
        part = slice(start, start + batch)
        t0 = time.perf_counter()
        pictures = []
        for image in images[part]:
            with Image.open(image) as im:
                pictures.append(im.convert("RGB"))
        found = [det.detect(pictures[0])] if batch == 1 else det.detect_many(pictures, batch_size=batch)
        spent = time.perf_counter() - t0
        seconds.extend([round(spent / len(pictures), 4)] * len(pictures))  # a call's seconds, shared by its images
        for record, image, azimuth, out in zip(found, images[part], azimuths[part], points_out[part]):
            record.update(image=str(image), azimuth_requested=int(azimuth))
            write_json(out, record)
    # where the job's seconds went (a forecast's parts: the load, then each image, the first with its warm-up)
    return {"models": [det.describe()], "precision": "fp32", "batch": batch,
            "timing": {"load_seconds": round(det.load_seconds, 4), "image_seconds": seconds}}
