"""Report-only pages (desk): the ladder table as HTML, and the walls and plan of the jobs that make the ladder.

The plan is the wall check the run's onstart and `fourloops plan` make (`walls.check_jobs` on each job's
ask, against the config machine, with the --resources and executor placement of this invocation),
taken over every job upstream of the ladder whether it still has to run or not. It is computed where
the asks live, in the Snakemake process that builds the DAG (`fourloops.plan.planned`, the rule's params), so a changed
ask or machine reruns it; the times are read by the job from the jobs' benchmark files, so they are
this run's measured seconds where a job ran, and the forecast where it did not.
"""

from __future__ import annotations


def run_plan_stage(plan: dict, out: str, model_set: str) -> dict:
    from fourloops import pages
    from fourloops.records import benchmark_seconds

    times = {}
    for job in plan["jobs"]:
        measured = benchmark_seconds(job["benchmark"])
        times[job["output"]] = ((measured, f"benchmark {job['benchmark']}") if measured is not None
                                else (job["forecast_seconds"], f"forecast: {job['forecast_source']}"))
    totals = pages.plan_page(plan, times, out, model_set)
    return {"model_set": model_set, "jobs": len(plan["jobs"]), "totals": totals}


def ladder_table_stage(table: str, out: str, model_set: str) -> dict:
    from fourloops import pages

    return {"model_set": model_set, "rows": pages.ladder_page(table, out, model_set)}
