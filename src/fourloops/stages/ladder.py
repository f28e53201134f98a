"""The ladder table: one row per condition x azimuth, plus the floor and floor_gt rows (desk)."""

from __future__ import annotations


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
