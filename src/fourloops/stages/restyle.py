"""Every configured render restyled per style: one job per style loads the generator once (pod)."""

from __future__ import annotations

from fourloops import determinism
from fourloops.stages.generate import View, views_from_one_load


def restyle_stage(
    references: list[str],
    images_out: list[str],
    manifest_out: str,
    style: str,
    instruction: str,
    azimuths: list[int],
    seed: int,
    model_set: str,
    generator: dict,
    machine: str = "desk",
    batch: int = 1,
) -> dict:
    """Each render at `azimuths` restyled by `instruction`; view seed = seed + azimuth, as generate's; `batch` views
    a pipeline call."""
    determinism.apply(seed)
    if not (len(references) == len(images_out) == len(azimuths)):
        raise ValueError(f"{len(references)} renders, {len(images_out)} outputs, {len(azimuths)} azimuths")
    views = [View(str(a), out, [ref], instruction, int(seed) + int(a))
             for a, ref, out in zip(azimuths, references, images_out)]
    head = {"style": style, "model_set": model_set}
    tail = {"instruction": instruction, "references": list(references), "azimuths": list(azimuths)}
    return views_from_one_load(views, manifest_out, generator, machine, head, tail, seed=int(seed),
                               batch=batch) | {"seed": int(seed)}
