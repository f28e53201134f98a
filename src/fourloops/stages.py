"""One function per workflow rule. Each takes paths and plain values (no Snakemake), writes its
outputs atomically, and returns the fields its provenance record needs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from fourloops.camera import OrbitCamera
from fourloops.io import read_json, write_json


def camera_from(camera: dict, center) -> OrbitCamera:
    return OrbitCamera(
        distance_m=float(camera["distance_m"]),
        elevation_deg=float(camera["elevation_deg"]),
        focal_px=float(camera["focal_px"]),
        image_size=int(camera["image_size"]),
        target=tuple(float(c) for c in center),
    )


# ---------------------------------------------------------------------------------------------- fit
def fit_stage(
    points: list[str], skeleton: str, out: str, source: str, kind: str, azimuths: list[int], camera: dict, fit: dict
) -> dict:
    """Fit the azimuth of every view of one source (a condition, the renders, or their ground truth)."""
    from fourloops.fit import fit_azimuth

    if len(points) != len(azimuths):
        raise ValueError(f"{len(points)} keypoint files for {len(azimuths)} azimuths")
    skel = read_json(skeleton)
    cam = camera_from(camera, skel["center"])
    rows = []
    for azimuth, path in zip(azimuths, points):
        rec = read_json(path)
        kp = np.asarray(rec["keypoints"], dtype=float)
        # Keypoints are in the pixels of the image they came from; the camera is in render pixels.
        kp = kp * (cam.image_size / float(rec["image_size"][0]))
        if kind == "ground_truth":
            weights = (np.asarray(rec["visibility"]) > 0).astype(float)
            score = None
        else:
            weights = np.asarray(rec["keypoint_scores"], dtype=float)
            weights = np.where(weights >= float(fit["min_keypoint_score"]), weights, 0.0)
            score = rec.get("score")
        result = fit_azimuth(kp, weights, skel["keypoints3d"], cam, grid_step_deg=float(fit["grid_step_deg"]))
        row = result.as_dict()
        row.update(
            azimuth_requested=int(azimuth),
            detector_score=score,
            image=rec["image"],
            keypoints=str(path),
        )
        rows.append(row)
    write_json(out, {"source": source, "kind": kind, "rows": rows})
    return {"points_fitted": len(rows)}


# ------------------------------------------------------------------------------------------- ladder
def ladder_stage(fits: list[str], manifests: list[str], csv_out: str, png_out: str, model_set: str) -> dict:
    from fourloops import ladder

    rows = ladder.ladder_rows(fits, manifests, model_set)
    ladder.write_csv(rows, csv_out)
    floor_gt = [r["abs_error_deg"] for r in rows if r["condition"] == "floor_gt" and r["abs_error_deg"] != ""]
    title = f"fourloops ladder ({model_set} model set)"
    if floor_gt:
        title += f"; fit floor max |err| {max(floor_gt):.2f} deg"
    ladder.plot(rows, png_out, title)
    return {"model_set": model_set, "rows": len(rows)}
