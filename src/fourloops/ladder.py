"""The ladder table and its plot: fitted azimuth per condition and view, with the two floors beside it."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from fourloops.camera import wrap_deg
from fourloops.io import atomic_path, read_json, write_text

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


def plot(rows: list[dict], path: str | Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 6.0), dpi=100)
    ax.plot([0, 360], [0, 360], color="0.8", lw=1, zorder=0, label="perfect")
    sources = sorted({r["condition"] for r in rows}, key=lambda s: (s in FLOOR_SOURCES, s))
    styles = {"floor": dict(marker="s", color="k", ms=9, mfc="none"), "floor_gt": dict(marker="x", color="k", ms=7)}
    conditions = [s for s in sources if s not in FLOOR_SOURCES]
    for source in sources:
        # conditions side by side around each requested azimuth, so equal answers do not hide each other
        shift = 4.0 * (conditions.index(source) - (len(conditions) - 1) / 2) if source in conditions else 0.0
        pts = [
            (r["azimuth_requested"] + shift, r["azimuth_fitted"])
            for r in rows
            if r["condition"] == source and r["azimuth_fitted"] != ""
        ]
        if not pts:
            continue
        xs, ys = zip(*pts)
        style = styles.get(source, dict(marker="o", ms=6))
        ax.plot(xs, ys, ls="none", label=source, **style)
    ax.set(xlim=(-10, 370), ylim=(-10, 370), xlabel="requested azimuth (deg)", ylabel="fitted azimuth (deg)", title=title)
    ax.set_xticks(range(0, 361, 45))
    ax.set_yticks(range(0, 361, 45))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
    plt.close(fig)
