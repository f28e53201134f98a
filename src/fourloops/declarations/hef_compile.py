"""The hef_compile stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.hef_compile is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops.stage import AskContext, Stage


def ask(ctx: AskContext, wildcards: dict, params: dict):
    from fourloops import asks

    return asks.recorded_ask(ctx.facts, "dfc_optimize", licensed=("dfc",))


def needs(params: dict) -> list:
    from fourloops.preflight import Need

    return [Need("dfc", params["hef"].get("dfc_wheel") or "", rule="hef_compile")]


STAGE = Stage(name="hef_compile", code="fourloops.stages.hef_compile",
              rules=("hef_compile",), profile="container", ask=ask, needs=needs,
              keep_last_good=True)
