"""rules/fit.smk: a source's keypoints (a condition's, the renders' detected ones, their ground truth) and its fit."""

from __future__ import annotations

LINEAGE = False  # a job's inputs and params, not its code: a change shows in them

from fourloops.names import render_keypoints, tags
from fourloops.rule_functions.render import camera_settings


def get_fit_inputs(config: dict, wildcards) -> dict:
    if wildcards.source == "floor_gt":
        points = [render_keypoints(t) for t in tags(config["azimuths"])]
    elif wildcards.source == "floor":
        points = [f"results/keypoints/render/az{t}.json" for t in tags(config["azimuths"])]
    else:
        points = [f"results/keypoints/{wildcards.source}/az{t}.json" for t in tags(config["ladder"]["azimuths"])]
    return {"points": points, "skeleton": "results/render/skeleton.json"}


def get_fit_params(config: dict, wildcards) -> dict:
    azimuths = config["ladder"]["azimuths"] if wildcards.source in config["conditions"] else config["azimuths"]
    return {
        "source": wildcards.source,
        "kind": "ground_truth" if wildcards.source == "floor_gt" else "detector",
        "azimuths": list(azimuths),
        "camera": camera_settings(config),
        "fit": dict(config["fit"]),
    }
