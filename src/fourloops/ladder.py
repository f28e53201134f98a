"""The ladder table and its plot: fitted azimuth per condition and view, with the two floors beside it."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from fourloops.camera import wrap_deg
from fourloops.io import read_json, write_text

COLUMNS = (
    "condition",
    "azimuth_requested",
    "azimuth_fitted",
    "error_deg",
    "abs_error_deg",
    "fit_residual",
    "fit_confidence",
    "detector_score",
    "generate_seconds_per_view",
    "peak_vram_gib",
    "generator",
    "lora",
    "model_set",
    "image",
    "keypoints",
)
FLOOR_SOURCES = ("floor", "floor_gt")


def _num(value, digits: int = 4):
    if value is None:
        return ""
    value = float(value)
    return "" if math.isnan(value) else round(value, digits)


def ladder_rows(fit_paths: list[str], manifest_paths: list[str], model_set: str) -> list[dict]:
    manifests = {}
    for path in manifest_paths:
        man = read_json(path)
        manifests[man["condition"]] = man
    rows = []
    for path in fit_paths:
        fit = read_json(path)
        source = fit["source"]
        man = manifests.get(source)
        for r in fit["rows"]:
            requested = r["azimuth_requested"]
            fitted = r["azimuth_deg"]
            err = float("nan") if fitted is None or math.isnan(fitted) else float(wrap_deg(fitted - requested))
            view = (man or {}).get("views", {}).get(str(requested), {})
            rows.append(
                {
                    "condition": source,
                    "azimuth_requested": requested,
                    "azimuth_fitted": _num(fitted),
                    "error_deg": _num(err),
                    "abs_error_deg": _num(abs(err)),
                    "fit_residual": _num(r["residual"], 6),
                    "fit_confidence": _num(r["confidence"]),
                    "detector_score": _num(r.get("detector_score")),
                    "generate_seconds_per_view": _num(view.get("seconds")),
                    "peak_vram_gib": _num(man.get("peak_vram_gib")) if man else "",
                    "generator": man["generator"]["backend"] if man else "render",
                    "lora": bool(man.get("lora", False)) if man else False,
                    "model_set": model_set,
                    "image": r["image"],
                    "keypoints": r["keypoints"],
                }
            )
    order = {name: i for i, name in enumerate(FLOOR_SOURCES)}
    rows.sort(key=lambda row: (order.get(row["condition"], -1), row["condition"], row["azimuth_requested"]))
    return rows


def write_csv(rows: list[dict], path: str | Path) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, buf.getvalue())


def _floor(rows: list[dict], source: str) -> tuple[list[float], list[float]]:
    pts = sorted((r["azimuth_requested"], r["abs_error_deg"]) for r in rows
                 if r["condition"] == source and r["abs_error_deg"] != "")
    return [a for a, _ in pts], [e for _, e in pts]


def plot(rows: list[dict], path: str | Path, title: str) -> None:
    """One panel per condition: signed error against the requested azimuth, over the two floors drawn as
    bands (what the same detector and fit get wrong on the true render, and the fit alone on its ground truth)."""
    from fourloops import figures

    plt = figures.pyplot()
    conditions = sorted({r["condition"] for r in rows} - set(FLOOR_SOURCES)) or ["(no condition)"]
    cols = min(3, len(conditions))
    nrows = -(-len(conditions) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.4 * nrows + 0.9), dpi=100, squeeze=False,
                             sharex=True, sharey=True)
    floor_az, floor_err = _floor(rows, "floor")
    gt_az, gt_err = _floor(rows, "floor_gt")
    for ax, condition in zip(axes.flat, conditions):
        if floor_az:
            ax.fill_between(floor_az, [-e for e in floor_err], floor_err, color="0.55", alpha=0.35, lw=0,
                            label="floor: render through detector + fit")
        if gt_az:
            # the fit's own floor is often a fraction of a degree: lines, so a band that thin still shows
            ax.plot(gt_az, gt_err, color="k", ls="--", lw=1, label="floor_gt: ground truth through fit")
            ax.plot(gt_az, [-e for e in gt_err], color="k", ls="--", lw=1)
        pts = sorted((r["azimuth_requested"], r["error_deg"]) for r in rows
                     if r["condition"] == condition and r["error_deg"] != "")
        if pts:
            ax.plot(*zip(*pts), marker="o", ms=5, lw=1, color="C0", label=f"{condition}: fitted - requested")
        ax.axhline(0, color="0.3", lw=0.6)
        ax.set_title(f"condition {condition}", fontsize=10)
        ax.set_xticks(range(0, 361, 45))
        ax.set_yticks(range(-180, 181, 45))
        ax.set(xlim=(-10, 325 if not pts else max(360 - 45, max(a for a, _ in pts)) + 10), ylim=(-185, 185))
        ax.grid(alpha=0.3)
        ax.legend(loc="lower left", fontsize=7)
    for ax in axes.flat[len(conditions):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("requested azimuth (deg)")
    for ax in axes[:, 0]:
        ax.set_ylabel("azimuth error (deg)")
    smoke = next((r["model_set"] for r in rows if r.get("model_set") in figures.MARKS), False)
    fig.suptitle(title, fontsize=10, y=0.93 if smoke else 0.99)
    fig.tight_layout(rect=(0, 0, 1, 0.9 if smoke else 0.96))
    if smoke:
        figures.mark_smoke(fig, smoke)
    figures.save_png(fig, path)
