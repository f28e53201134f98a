"""rules/keypoints.smk: the images of a keypoint set (the renders, a condition's views, a style's) and the detector."""

from __future__ import annotations

LINEAGE = False  # a job's inputs, not its code: a change shows in them

from fourloops import model_sets
from fourloops.names import render_image, tags


def get_keypoint_inputs(config: dict, wildcards) -> dict:
    if wildcards.kpset == "render":
        images = [render_image(t) for t in tags(config["azimuths"])]
        manifest = []
    elif wildcards.kpset.startswith("restyle/"):
        images = [f"results/{wildcards.kpset}/az{t}.png" for t in tags(config["restyle"]["azimuths"])]
        manifest = [f"results/{wildcards.kpset}/views.json"]
    else:
        images = [f"results/generate/{wildcards.kpset}/az{t}.png" for t in tags(config["ladder"]["azimuths"])]
        manifest = [f"results/generate/{wildcards.kpset}/views.json"]
    return {"images": images, "manifest": manifest, **model_sets.built_models(config, "detector")}
