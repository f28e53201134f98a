"""rules/drift.smk: a style's keypoints beside the renders'."""

from __future__ import annotations

LINEAGE = False  # a job's inputs, not its code: a change shows in them

from fourloops.names import tags


def get_drift_inputs(config: dict, wildcards) -> dict:
    restyled = tags(config["restyle"]["azimuths"])
    return {
        "render": [f"results/keypoints/render/az{t}.json" for t in restyled],
        "restyled": [f"results/keypoints/restyle/{wildcards.style}/az{t}.json" for t in restyled],
    }
