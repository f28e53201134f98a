"""Precisions: which a record names, which count as quantised, and which tokens a name carries."""

from __future__ import annotations

import re
from typing import Iterable

DEFAULT_DENY = ("nf4", "int4", "int8")
# Precisions that are not quantisation. Anything else a record names (nf4, int8, a8_w8, a16_w16, fp8,
# or a name this list does not know) counts as quantised: an unknown precision does not pass as full.
FULL_PRECISIONS = frozenset({"fp64", "fp32", "tf32", "fp16", "bf16", "float64", "float32", "float16", "bfloat16"})
# Tokens a deliverable's name must not carry (besides the deny patterns and its own precision).
PRECISION_TOKENS = (
    "fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4", "nf4", "int2", "int4", "int8", "int16",
    "a8_w8", "a8_w4", "a16_w16", "a16_w8", "w8a8", "w4a16", "w8a16", "q4", "q8", "gptq", "awq",
)


def record_precisions(data: dict) -> list[str]:
    """The precisions a record names: its own and each model's."""
    out = []
    if data.get("precision"):
        out.append(str(data["precision"]).lower())
    for model in data.get("models") or []:
        if isinstance(model, dict) and model.get("precision"):
            out.append(str(model["precision"]).lower())
    return sorted(set(out))


def is_quantised(precision: str) -> bool:
    return precision.lower() not in FULL_PRECISIONS


def _tokens(text: str) -> str:
    return "_" + re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") + "_"


def name_tokens(path: str, tokens: Iterable[str]) -> list[str]:
    """The tokens (case-insensitive, bounded by non-alphanumerics) that `path` carries."""
    haystack = _tokens(path)
    return sorted({t for t in tokens if t and _tokens(t) != "__" and _tokens(t) in haystack})
