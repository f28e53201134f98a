"""Contact sheets: every image of one set (the renders, or one condition's generated views) in one row."""

from __future__ import annotations

from pathlib import Path


def contact_sheet(images: list[str], azimuths: list[int], path: str | Path, title: str, smoke: bool) -> None:
    from PIL import Image

    from fourloops import figures

    if len(images) != len(azimuths):
        raise ValueError(f"{len(images)} images for {len(azimuths)} azimuths")
    plt = figures.pyplot()
    fig, axes = plt.subplots(1, len(images), figsize=(1.9 * len(images), 2.9), dpi=100, squeeze=False)
    for ax, image, azimuth in zip(axes[0], images, azimuths):
        with Image.open(image) as im:
            ax.imshow(im.convert("RGB"))
        ax.set_title(f"{azimuth} deg", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title, fontsize=10, y=0.86 if smoke else 0.97)
    fig.tight_layout(rect=(0, 0, 1, 0.82 if smoke else 0.93))
    if smoke:
        figures.mark_smoke(fig, smoke)
    figures.save_png(fig, path)
