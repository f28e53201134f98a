"""rules/grades.smk: a style's restyled views beside their renders, the scorer, and the grading settings."""

from __future__ import annotations

LINEAGE = False  # a job's inputs and params, not its code: a change shows in them

from fourloops import model_sets
from fourloops.names import render_image, tags


def get_grades_inputs(config: dict, wildcards) -> dict:
    restyled = tags(config["restyle"]["azimuths"])
    inputs = {
        "renders": [render_image(t) for t in restyled],
        "restyled": [f"results/restyle/{wildcards.style}/az{t}.png" for t in restyled],
        "manifest": f"results/restyle/{wildcards.style}/views.json",
    }
    return inputs | model_sets.built_models(config, "scorer")


def get_grades_params(config: dict, wildcards) -> dict:
    g = config["grades"]
    return {
        "style": wildcards.style,
        "instruction": config["restyle"]["styles"][wildcards.style],
        "azimuths": list(config["restyle"]["azimuths"]),
        # the graded images' size (a render and a restyled view per question): the scorer's prompt, and so its
        # pass, grows with it (fourloops.asks.scorer_ask); the larger of the two, the ask's safe side
        "scorer": {**model_sets.scorer(config),
                   "image_size": max(int(config["render"]["image_size"]), int(model_sets.generator(config)["size"]))},
        "score_range": g["score_range"],
        "num_pass": g["num_pass"],
        "retries": g["retries"],
        "seed": g["seed"],
        "model_set": config["model_set"],
    }
