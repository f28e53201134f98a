"""Contact sheets for the report: the renders, and each condition's generated views, asked azimuths in a row (desk)."""

from __future__ import annotations


def sheet_stage(images: list[str], azimuths: list[int], out: str, title: str, model_set: str) -> dict:
    from fourloops.figures import marked
    from fourloops.sheets import contact_sheet

    contact_sheet(images, azimuths, out, title, smoke=marked(model_set))
    return {"model_set": model_set, "images": len(images)}
