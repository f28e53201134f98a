"""rules/generate.smk: a ladder condition's references, models and LoRA, and its job's settings."""

from __future__ import annotations

LINEAGE = False  # a job's inputs and params, not its code: a change shows in them

from fourloops import model_sets
from fourloops.names import az_tag, lora_file, render_image


def get_generate_inputs(config: dict, wildcards) -> dict:
    cond = config["conditions"][wildcards.condition]
    inputs = {"references": [render_image(az_tag(a)) for a in cond["references"]]}
    inputs.update(model_sets.built_models(config, "generator"))
    if cond.get("lora", False):  # the camera LoRA (rules/lora.smk): a retrained one makes this condition stale
        inputs["lora"] = lora_file(config)
    return inputs


def get_generate_params(config: dict, wildcards) -> dict:
    cond = config["conditions"][wildcards.condition]
    return {
        "condition": wildcards.condition,
        "reference_azimuths": list(cond["references"]),
        "prompt": cond["prompt"],
        "lora": bool(cond.get("lora", False)),
        "azimuths": list(config["ladder"]["azimuths"]),
        "seed": config["seed"],
        "model_set": config["model_set"],
        "generator": model_sets.generator(config),
    }
