"""The camera LoRA's training records: ordered pairs of distinct record azimuths (source view -> target view),
drawn once with a seed, each with the instruction naming the target azimuth; written as JSON lines."""

from __future__ import annotations

import json
import random
import string

from fourloops.io import write_text


class LoraError(ValueError):
    """A LoRA setting or input that cannot train. The message names the key, the value and what is allowed;
    it is raised before anything is written."""


# ------------------------------------------------------------------------------------------ records
def azimuth_pairs(azimuths: list[int], count: int, seed: int, key: str = "lora.records") -> list[tuple[int, int]]:
    """`count` distinct ordered (source, target) pairs of distinct azimuths, drawn with `seed`."""
    pairs = [(int(s), int(t)) for s in azimuths for t in azimuths if s != t]
    if count > len(pairs):
        raise LoraError(f"{key}.count = {count}: more records than azimuth pairs; allowed: at most {len(pairs)} "
                        f"({len(azimuths)} azimuths give {len(azimuths)} x {len(azimuths) - 1} ordered pairs)")
    return random.Random(int(seed)).sample(pairs, int(count))


def instruction_for(template: str, target: int, source: int) -> str:
    fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    if "azimuth" not in fields or fields - {"azimuth", "source_azimuth"}:
        raise LoraError(f"lora.records.instruction = {template!r}: allowed: a text with {{azimuth}} (the target "
                        "view's) and optionally {source_azimuth}")
    return template.format(azimuth=int(target), source_azimuth=int(source))


def make_records(pairs: list[tuple[int, int]], template: str, image_of: dict[int, str]) -> list[dict]:
    return [{"id": f"r{i:04d}", "source": image_of[s], "target": image_of[t], "source_azimuth": s,
             "target_azimuth": t, "instruction": instruction_for(template, t, s)} for i, (s, t) in enumerate(pairs)]


def write_records(path: str, records: list[dict]) -> None:
    write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))


def read_records(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    if not records:
        raise LoraError(f"{path}: no training records")
    return records
