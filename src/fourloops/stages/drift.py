"""Keypoint drift per restyle style: the render's keypoints against the restyled view's (desk)."""

from __future__ import annotations


def drift_stage(render_points: list[str], restyled_points: list[str], azimuths: list[int], style: str,
                drift: dict, csv_out: str, regions_out: str, png_out: str, model_set: str) -> dict:
    import pandas as pd

    from fourloops import drift as d
    from fourloops.io import atomic_path, read_json

    if not (len(render_points) == len(restyled_points) == len(azimuths)):
        raise ValueError(f"{len(render_points)} render and {len(restyled_points)} restyled keypoint files "
                         f"for {len(azimuths)} azimuths")
    rows = []
    for az, ref, new in zip(azimuths, render_points, restyled_points):
        rows += d.view_rows(style, az, read_json(ref), read_json(new), float(drift["min_score"]))
    table = pd.DataFrame(rows, columns=d.DRIFT_COLUMNS).assign(model_set=model_set)  # a smoke table says so
    regions = pd.DataFrame(d.region_rows(style, table, drift["regions"]), columns=d.REGION_COLUMNS)
    regions["model_set"] = model_set
    for frame, out in ((table, csv_out), (regions, regions_out)):
        with atomic_path(out) as tmp:
            frame.to_csv(tmp, index=False, na_rep="NaN", float_format="%.6g")
    from fourloops.figures import marked

    smoke = marked(model_set)  # smoke or sizing: the figure says its values are not a result
    d.heatmap(table, png_out, f"{smoke.upper() + ' ' if smoke else ''}keypoint drift, style {style}", smoke)
    return {"model_set": model_set, "views": len(azimuths),
            "regions": dict(zip(regions["region"], regions["status"]))}
