"""The azimuth back from 2D keypoints, per source: a condition, the renders (floor), their ground truth (desk)."""

from __future__ import annotations

from fourloops.io import read_json, write_json


def fit_stage(
    points: list[str], skeleton: str, out: str, source: str, kind: str, azimuths: list[int], camera: dict, fit: dict
) -> dict:
    """Fit the azimuth of every view of one source (a condition, the renders, or their ground truth)."""
    import numpy as np

    from fourloops.camera import camera_from
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
