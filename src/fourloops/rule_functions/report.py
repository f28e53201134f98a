"""rules/report.smk: the run plan the report's plan page shows, and what the report gathers."""

from __future__ import annotations

LINEAGE = False  # a job's params, not its code: a change shows in them


def planned(view, targets: list[str]) -> dict:
    """fourloops.plan.planned, imported only when the run_plan job is in the DAG (its walls, pods and levers cost
    every other parse ~10 ms)."""
    from fourloops.plan import planned as plan_of

    return plan_of(view, targets)


def shown(config: dict) -> list[str]:
    """Everything the report shows of the run itself (its ladder, pages, sheets, drift and grades)."""
    conditions, styles = list(config["conditions"]), list(config["restyle"]["styles"])
    return [
        "results/ladder.csv",
        "results/ladder.png",
        "results/report/ladder.html",
        "results/report/plan.html",
        "results/sheets/render.png",
        *(f"results/sheets/{condition}.png" for condition in conditions),
        *(f"results/drift/{style}.{part}" for style in styles for part in ("png", "regions.csv")),
        *(f"results/grades/{style}.csv" for style in styles),
    ]


def get_report_contents(config: dict, wildcards) -> list[str]:
    """What the report gathers: the run, and its comparison with another run where config compare.against names one
    (rules/compare.smk, which runs after the rest)."""
    against = ["results/compare/against.csv", "results/compare/against.html"] if config["compare"]["against"] else []
    return shown(config) + against
