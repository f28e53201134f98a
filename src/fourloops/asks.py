"""What a job asks of a machine, computed from config/models.yaml facts, not typed per rule."""

from __future__ import annotations

import math
from pathlib import Path

import yaml

GIB = 2**30
MIB = 2**20


def load_facts(path: str | Path) -> dict:
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def generator_weights_gib(facts: dict, backend: str, precision: str) -> float:
    """Weights of every component at `precision` (what stays unquantised under nf4 is not modelled here)."""
    gen = facts["generators"][backend]
    params = sum(float(c["params"]) for c in gen["components"].values())
    return params * float(facts["bytes_per_param"][precision]) / GIB


def generator_vram_gib(facts: dict, backend: str, precision: str) -> tuple[float, str]:
    """Peak VRAM of one generator job and where the figure comes from."""
    measured = (facts["generators"][backend].get("measured_peak_gib") or {}).get(precision)
    if measured is not None:
        return float(measured), f"models.yaml measured_peak_gib.{precision}"
    est = generator_weights_gib(facts, backend, precision) * float(facts["activation_overhead"])
    return est, "estimate: params x bytes_per_param x activation_overhead"


def generator_vram_mb(facts: dict, backend: str, precision: str) -> int:
    return int(math.ceil(generator_vram_gib(facts, backend, precision)[0] * GIB / MIB))


def generator_ram_mb(facts: dict, backend: str) -> int:
    """Loading streams bf16 shards through system memory; ask for one bf16 copy plus the interpreter."""
    return int(math.ceil((generator_weights_gib(facts, backend, "bf16") + 4.0) * GIB / MIB))


def detector_vram_mb(facts: dict) -> int:
    det = facts["detectors"]["rfdetr_keypoint_preview"]
    return int(math.ceil(float(det["measured_peak_gib"]["fp32"]) * GIB / MIB)) + 512  # + CUDA context
