"""Every configured render restyled per style: one job per style loads the generator once (pod)."""

from __future__ import annotations

from fourloops.stage import AskContext, Stage
from fourloops.stages.generate import GENERATOR_KNOBS, View, measures, views_from_one_load


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
) -> dict:
    """Each render at `azimuths` restyled by `instruction`; view seed = seed + azimuth, as generate's."""
    if not (len(references) == len(images_out) == len(azimuths)):
        raise ValueError(f"{len(references)} renders, {len(images_out)} outputs, {len(azimuths)} azimuths")
    views = [View(str(a), out, [ref], instruction, int(seed) + int(a))
             for a, ref, out in zip(azimuths, references, images_out)]
    head = {"style": style, "model_set": model_set}
    tail = {"instruction": instruction, "references": list(references), "azimuths": list(azimuths)}
    return views_from_one_load(views, manifest_out, generator, machine, head, tail) | {"seed": int(seed)}


# ------------------------------------------------------------------------------------ declaration
def ask(ctx: AskContext, wildcards: dict, params: dict):
    from fourloops import asks

    job = params["job"]
    if job["model_set"] == "smoke":  # the tiny generator on the CPU
        return asks.stage_ask(ctx.facts, "smoke_generate")
    return asks.generator_ask(ctx.facts, job["generator"], n_references=1, n_views=len(job["azimuths"]),
                              measured=ctx.measured, machine=ctx.machine)


def needs(params: dict) -> list:
    from fourloops.preflight import generator_needs

    return generator_needs(params["job"]["generator"], "restyle")


STAGE = Stage(name="restyle", rules=("restyle",), profile="pod", ask=ask, needs=needs, measures=measures,
              keep_last_good=True, knobs=GENERATOR_KNOBS,
              offload_at=lambda wildcards: ("job", "generator"))
