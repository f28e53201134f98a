"""rules/report.smk: the run plan the report's plan page shows."""

from __future__ import annotations

LINEAGE = False  # a job's params, not its code: a change shows in them


def planned(view, targets: list[str]) -> dict:
    """fourloops.plan.planned, imported only when the run_plan job is in the DAG (its walls, pods and levers cost
    every other parse ~10 ms)."""
    from fourloops.plan import planned as plan_of

    return plan_of(view, targets)
