"""Keypoint drift between a render and its restyled view: per view and joint, per region, and a heatmap.

Points are compared in the render's pixels (a restyled view may have another size), and normalised by the
diagonal of the person's box detected in the render. A region needing a joint the detector's schema lacks
is NOT_RUN with the reason; a region whose joints were all unusable is NO_DATA: neither gets a number.
"""

from __future__ import annotations

import math

import numpy as np

from fourloops.coco import COCO17_NAMES

MEASURED, NOT_RUN, NO_DATA = "MEASURED", "NOT_RUN", "NO_DATA"

DRIFT_COLUMNS = [
    "style", "azimuth", "joint", "render_x", "render_y", "restyled_x", "restyled_y", "displacement_px",
    "displacement_norm", "bbox_diagonal_px", "render_score", "restyled_score", "low_confidence", "note", "model_set",
]
REGION_COLUMNS = ["style", "region", "joints", "status", "mean_norm_drift", "max_norm_drift", "values",
                  "low_confidence_left_out", "reason", "model_set"]


def _scaled(record: dict, size: float) -> np.ndarray:
    """A keypoint record's points in pixels of an image `size` wide (square images)."""
    return np.asarray(record["keypoints"], dtype=float) * (size / float(record["image_size"][0]))


def view_rows(style: str, azimuth: int, render: dict, restyled: dict, min_score: float) -> list[dict]:
    """One row per COCO-17 joint of one view. `render`, `restyled`: keypoint records (fourloops.keypoints)."""
    for name, rec in (("render", render), ("restyled", restyled)):
        if list(rec["keypoint_names"]) != list(COCO17_NAMES):
            raise ValueError(f"{name} keypoints at azimuth {azimuth}: names {rec['keypoint_names']} are not COCO-17")
    size = float(render["image_size"][0])
    ref, new = _scaled(render, size), _scaled(restyled, size)
    x0, y0, x1, y1 = (float(v) for v in render["bbox"])
    diagonal = math.hypot(x1 - x0, y1 - y0) if render["detected"] else math.nan
    note = ("no person detected in the render" if not render["detected"] else
            "no person detected in the restyled view" if not restyled["detected"] else "")
    rows = []
    for j, joint in enumerate(COCO17_NAMES):
        d = float(np.hypot(*(new[j] - ref[j]))) if note == "" else math.nan
        rs, ns = float(render["keypoint_scores"][j]), float(restyled["keypoint_scores"][j])
        rows.append({
            "style": style, "azimuth": int(azimuth), "joint": joint,
            "render_x": ref[j][0], "render_y": ref[j][1], "restyled_x": new[j][0], "restyled_y": new[j][1],
            "displacement_px": d, "displacement_norm": d / diagonal if diagonal > 0 else math.nan,
            "bbox_diagonal_px": diagonal, "render_score": rs, "restyled_score": ns,
            "low_confidence": bool(min(rs, ns) < min_score), "note": note,
        })
    return rows


def region_rows(style: str, drift, regions: dict[str, list[str]], known=COCO17_NAMES) -> list[dict]:
    """Mean and max normalised drift over each region's joints (all views), confident values only."""
    out = []
    for region, joints in regions.items():
        row = {"style": style, "region": region, "joints": ";".join(joints), "mean_norm_drift": math.nan,
               "max_norm_drift": math.nan, "values": 0, "low_confidence_left_out": 0}
        missing = [j for j in joints if j not in known]
        if missing:
            out.append(row | {"status": NOT_RUN, "reason": f"the detector's schema (COCO-17) has no {', '.join(missing)}"})
            continue
        sel = drift[drift["joint"].isin(joints)]
        finite = sel[np.isfinite(sel["displacement_norm"].to_numpy(dtype=float))]
        confident = finite[~finite["low_confidence"].astype(bool)]
        row.update(values=int(len(confident)), low_confidence_left_out=int(len(finite) - len(confident)))
        if confident.empty:
            why = (f"all {len(finite)} values below the confidence threshold" if len(finite)
                   else "no joint of the region was measured (no person detected)")
            out.append(row | {"status": NO_DATA, "reason": why})
            continue
        values = confident["displacement_norm"].to_numpy(dtype=float)
        out.append(row | {"status": MEASURED, "mean_norm_drift": float(values.mean()),
                          "max_norm_drift": float(values.max()), "reason": ""})
    return out


def heatmap(drift, out: str, title: str, smoke: bool) -> None:
    """Joints x views of the normalised drift; unmeasured cells grey, low-confidence cells hatched."""
    from fourloops.figures import mark_smoke, pyplot, save_png

    plt = pyplot()
    table = drift.pivot(index="joint", columns="azimuth", values="displacement_norm").reindex(list(COCO17_NAMES))
    low = drift.pivot(index="joint", columns="azimuth", values="low_confidence").reindex(list(COCO17_NAMES))
    fig, ax = plt.subplots(figsize=(1.2 + 0.7 * table.shape[1], 6.5))
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad("#bbbbbb")
    im = ax.imshow(np.ma.masked_invalid(table.to_numpy(dtype=float)), cmap=cmap, aspect="auto", vmin=0)
    for (i, j), flag in np.ndenumerate(low.to_numpy(dtype=bool)):
        if flag:
            ax.text(j, i, "low", ha="center", va="center", fontsize=6, color="white")
    ax.set_xticks(range(table.shape[1]), [f"{a}°" for a in table.columns])
    ax.set_yticks(range(table.shape[0]), table.index)
    ax.set_xlabel("view (azimuth)")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="drift / bbox diagonal")
    fig.tight_layout(rect=(0, 0, 1, 0.95 if smoke else 1))
    if smoke:
        mark_smoke(fig, smoke)
    save_png(fig, out)
