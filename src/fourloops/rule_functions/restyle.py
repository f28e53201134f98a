"""rules/restyle.smk: the renders a style restyles, the generator, and the style's settings."""

from __future__ import annotations

LINEAGE = False  # a job's inputs and params, not its code: a change shows in them

from fourloops import model_sets
from fourloops.names import render_image, tags


def get_restyle_inputs(config: dict, wildcards) -> dict:
    return {"references": [render_image(t) for t in tags(config["restyle"]["azimuths"])],
            **model_sets.built_models(config, "generator")}


def get_restyle_params(config: dict, wildcards) -> dict:
    return {
        "style": wildcards.style,
        "instruction": config["restyle"]["styles"][wildcards.style],
        "azimuths": list(config["restyle"]["azimuths"]),
        "seed": config["restyle"]["seed"],
        "model_set": config["model_set"],
        "generator": model_sets.generator(config),
    }
