"""How many items a GPU job puts through its model in one call: a batch knob per GPU stage (`generator.batch`,
`lora.micro_batch`, `keypoints.batch`, `grades.batch`), a number or `auto`.

`auto` is the largest batch whose wall fits the card of the machine the job is placed on: the stage's ask is
computed at each batch (fourloops.asks models a batch as the one-item pass plus the activations of each further
item) and the largest that fits the machine's VRAM, and the VRAM the Snakemake that runs it provides, is taken; a
job no batch fits is asked at 1, and the walls refuse it with their levers. The chosen batch is the ask's `batch`,
which the job receives as its `batch` resource. Batched kernels round differently (on an H100, OmniGen2's views at 8
a call came out up to 9 levels off their one-a-call bytes), so a stage whose bytes follow the batch
(`Stage.batch_changes_bytes`) has it in its jobs' identity: placed where another batch fits, a job runs again.
"""

from __future__ import annotations

LINEAGE = False  # how a batch is chosen: the batch itself enters the identity of a job whose bytes follow it

import dataclasses
from typing import Callable

AUTO = "auto"


# The most items one call of a batch knob may ask for (config/schema.yaml's bound on generator.batch, keypoints.batch
# and grades.batch).
MOST = 64

# The most items a probe times a call at for `auto`: the ladder's default views per condition (config.yaml
# ladder.azimuths), the most one generate job batches. Fewer where the probe job's walls fit fewer on its card.
PROBE_AUTO_MOST = 8


class BatchError(ValueError):
    pass


def setting(value, key: str) -> int | str:
    """A batch knob's value checked: `auto` or a whole number >= 1 (the config schema says the same)."""
    if value == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BatchError(f"{key} = {value!r}: not a batch; allowed: {AUTO!r} or a whole number >= 1")
    return value


def card_gib(machine: str, provided_vram_mb: int | None = None) -> float | None:
    """The VRAM a job placed on `machine` may fill: its card (config/machines.yaml), or less where the Snakemake
    that runs it provides less (`--resources vram_mb`); None for a machine without a card or not in the file."""
    from fourloops import machines

    try:
        table = machines.load()
        if machine in machines.clusters(table):
            # a SLURM cluster: its smallest partition's card, so that a job that fits there at this batch still goes
            # to the default or the smallest partition (fourloops.slurm places a job by its ask)
            cards = [p.machine.vram_gib for p in machines.cluster(table, machine).partitions if p.machine.vram_gib]
            found = min(cards) if cards else None
        else:
            found = machines.machine(table, machine).vram_gib
    except machines.MachinesError:
        found = None
    if provided_vram_mb is not None:
        provided = provided_vram_mb / 1024.0
        found = provided if not found else min(found, provided)
    return found or None


def choose(ask_at: Callable[[int], object], value, *, most: int, limit_gib: float | None, key: str):
    """The ask of the batch `value` asks for: a number (at most `most`, the items the job has or the model takes a
    call), or for `auto` the largest batch up to `most` whose VRAM ask fits `limit_gib` (1 when none does, or when
    there is no card to fill). The returned ask's `batch` is the batch chosen, and its VRAM source says how."""
    value = setting(value, key)
    most = max(1, int(most))
    if value != AUTO:
        chosen = min(int(value), most)
        found = ask_at(chosen)
        if chosen == 1:
            return found  # one item a call: the ask as it always was
        return _with_batch(found, chosen, f"{key} = {value}" + (f", {chosen} here" if chosen != value else ""))
    first = ask_at(1)
    if limit_gib is None or first.vram.value <= 0 or most == 1:
        return _with_batch(first, 1, f"{key} = auto: 1 ({'one item' if most == 1 else 'no card to fill'})")
    best = first
    chosen = 1
    for b in range(most, 1, -1):  # asks grow with the batch: the first from the top that fits is the largest
        found = ask_at(b)
        if found.vram.value <= limit_gib:
            best, chosen = found, b
            break
    return _with_batch(best, chosen, f"{key} = auto: {chosen} of at most {most}, the largest whose ask fits "
                                     f"{limit_gib:g} GiB")


def _with_batch(ask, batch: int, why: str):
    from fourloops.asks import Figure

    return dataclasses.replace(ask, batch=int(batch), vram=Figure(ask.vram.value, f"{ask.vram.source} [{why}]"))


def resolved(resources, default: int = 1) -> int:
    """The batch a job was given (its `batch` resource), in the job."""
    value = getattr(resources, "batch", None) if not isinstance(resources, dict) else resources.get("batch")
    return int(value) if value else default
