"""The run's names that more than one stage's files use, from its config: the azimuth tags in file names, the
renders' files and the camera LoRA's file. rules/common.smk gives them to the rule files as globals
(RENDER_TAGS, ...); the rules' input and params functions (fourloops.rule_functions) call them. Plain functions of
the config, testable without Snakemake."""

from __future__ import annotations

# What these return are a job's input paths and params, so a change shows there: no part of any job's code.
LINEAGE = False


def az_tag(azimuth) -> str:
    """An azimuth as file names carry it: 45 -> "045"."""
    return f"{int(azimuth):03d}"


def tags(azimuths) -> list[str]:
    return [az_tag(a) for a in azimuths]


def sources(config: dict) -> list[str]:
    """The fit's sources: every ladder condition, the renders' detected keypoints (floor) and their ground truth."""
    return list(config["conditions"]) + ["floor", "floor_gt"]


def render_image(tag: str) -> str:
    return f"results/render/az{tag}.png"


def render_keypoints(tag: str) -> str:
    return f"results/render/az{tag}.json"


def lora_file(config: dict) -> str:
    """The camera LoRA rules/lora.smk trains and the `lora: true` conditions load."""
    return f"results/lora/{config['lora']['name']}.safetensors"
