"""The restyle stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.restyle is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops.declarations.generate import GENERATOR_KNOBS, generator_batch_ask, measures
from fourloops.stage import AskContext, Stage


def ask(ctx: AskContext, wildcards: dict, params: dict):
    from fourloops import asks

    job = params["job"]
    if job["model_set"] == "smoke":  # the tiny generator on the CPU
        return asks.stage_ask(ctx.facts, "smoke_generate")
    return generator_batch_ask(ctx, job["generator"], n_references=1, n_views=len(job["azimuths"]))


def needs(params: dict) -> list:
    from fourloops.preflight import generator_needs

    return generator_needs(params["job"]["generator"], "restyle")


STAGE = Stage(name="restyle", code="fourloops.stages.restyle",
              rules=("restyle",), profile="pod", ask=ask, needs=needs, measures=measures,
              keep_last_good=True, knobs=GENERATOR_KNOBS, batch_changes_bytes=True,
              offload_at=lambda wildcards: ("job", "generator"))
