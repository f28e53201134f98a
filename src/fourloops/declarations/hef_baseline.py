"""The hef_baseline stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.hef_baseline is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops.stage import Stage


def needs(params: dict) -> list:
    from fourloops.preflight import Need

    det = params.get("detector")
    return [Need("checkpoint", det["weights"], rule="hef_cpu_baseline")] if det else []


STAGE = Stage(name="hef_baseline", code="fourloops.stages.hef_baseline",
              rules=("hef_cpu_baseline", "hef_latency_table"), profile="desk", needs=needs)
