"""rules/lora.smk: the camera LoRA's names, its records' settings, the inputs and settings of its embeddings and
training."""

from __future__ import annotations

LINEAGE = False  # a job's inputs and params, not its code: a change shows in them

from fourloops import model_sets
from fourloops.names import tags
from fourloops.rule_functions.render import camera_settings


def lora_checkpoints(config: dict) -> str:
    """Resume checkpoints: not an output (Snakemake removes a failed job's outputs; these must outlive a kill)."""
    return f"results/lora/checkpoints/{config['lora']['name']}"


def lora_record_tags(config: dict) -> list[str]:
    return tags(model_sets.lora_records(config)["azimuths"])


def get_lora_records_params(config: dict, wildcards) -> dict:
    rec = model_sets.lora_records(config)
    return {
        "azimuths": list(rec["azimuths"]),
        "count": rec["count"],
        "seed": rec["seed"],
        "instruction": rec["instruction"],
        "body": config["render"]["body"],
        "camera": camera_settings(config),
        "background": config["render"]["background"],
    }


def get_lora_inputs(config: dict, wildcards) -> dict:
    inputs = {
        "records": "results/lora/records.jsonl",
        "images": [f"results/lora/records/az{az}.png" for az in lora_record_tags(config)],
    }
    return inputs | model_sets.built_models(config, "generator", sets=("smoke",))


def get_lora_train_inputs(config: dict, wildcards) -> dict:
    return get_lora_inputs(config, wildcards) | {"embeddings": "results/lora/embeddings.safetensors"}


def get_lora_embeddings_params(config: dict, wildcards) -> dict:
    return {
        **model_sets.lora_embeddings(config),
        "records": model_sets.lora_records(config)["count"],
        "model_set": config["model_set"],
    }


def get_lora_train_params(config: dict, wildcards) -> dict:
    return model_sets.lora_train(config)
