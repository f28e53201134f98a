"""What every figure a person reads shares: the smoke mark, and a byte-stable PNG written atomically."""

from __future__ import annotations

from pathlib import Path

from fourloops.io import atomic_path

SMOKE_MARK = "SMOKE: tiny random models, not a result"
SIZING_MARK = "SIZING: real shapes, random weights: the values mean nothing (memory and time only)"
MARKS = {"smoke": SMOKE_MARK, "sizing": SIZING_MARK}  # model sets whose figures are not results


def marked(model_set) -> str | bool:
    """The model set to mark a figure or page with (a key of MARKS), or False for a result."""
    return model_set if model_set in MARKS else False


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def mark_smoke(fig, model_set="smoke") -> None:
    """A smoke (or sizing) figure says so on its face: a red banner along the top and a diagonal watermark."""
    model_set = model_set if model_set in MARKS else "smoke"
    fig.text(0.5, 0.995, MARKS[model_set], ha="center", va="top", color="white", fontsize=11, weight="bold",
             bbox=dict(facecolor="#c0392b", edgecolor="none", pad=3))
    fig.text(0.5, 0.45, model_set.upper(), ha="center", va="center", rotation=30, fontsize=80, weight="bold",
             color="#c0392b", alpha=0.12, zorder=0)


def save_png(fig, path: str | Path) -> None:
    plt = pyplot()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
    plt.close(fig)
