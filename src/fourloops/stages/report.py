"""Report-only pages (desk): the ladder table as HTML, and the walls and plan of the jobs that make the ladder.

The plan is the wall check the run's onstart and `fourloops plan` make (`walls.check_jobs` on each job's
ask, against the config machine, with the --resources and executor placement of this invocation),
taken over every job upstream of the ladder whether it still has to run or not. It is computed where
the asks live, in the Snakemake process that builds the DAG (`planned`, the rule's params), so a changed
ask or machine reruns it; the times are read by the job from the jobs' benchmark files, so they are
this run's measured seconds where a job ran, and the forecast where it did not.
"""

from __future__ import annotations

from dataclasses import asdict

from fourloops.stage import Stage


def planned(view, targets: list[str]) -> dict:
    """Every job upstream of `targets`, checked against the walls: plain values, for a rule's params."""
    from fourloops import machines, walls

    found: dict[tuple, tuple[str, dict]] = {}
    for path in sorted(view.requested_paths(targets)):
        for rule, wildcards in view.producers(path):
            found.setdefault((rule, tuple(sorted(wildcards.items()))), (rule, wildcards))
    pending, benchmarks = [], {}
    for rule, wildcards in sorted(found.values(), key=lambda x: (x[0], sorted(x[1].items()))):
        snakerule = view.wf.get_rule(rule)
        output = str(snakerule.expand_output(wildcards)[0][0])
        bench = snakerule.expand_benchmark(wildcards)
        benchmarks[output] = str(bench) if bench is not None else ""
        pending.append(walls.PendingJob(rule=rule, output=output, profile=view.profile(rule, wildcards),
                                        ask=view.ask(rule, wildcards), wildcards=wildcards))
    target = view.config["machine"]
    placement = machines.placement(view.executor(), view.machines)
    verdict = walls.check_jobs(pending, view.machines, target, view.provided_vram_mb(), placement)
    jobs = []
    for job, rows in verdict.checked:
        where = walls.target_for(job, view.machines, target, placement)
        refused = [r.wall for r in rows if not r.ok]
        jobs.append({
            "rule": job.rule, "output": job.output, "profile": job.profile, "machine": where.label(),
            "hourly_usd": where.hourly_usd, "walls": [asdict(r) for r in rows],
            "verdict": "fits" if not refused else "refused: " + ", ".join(refused),
            "forecast_seconds": job.ask.seconds.value, "forecast_source": job.ask.seconds.source,
            "benchmark": benchmarks[job.output],
        })
    return {"target": verdict.machine.label(), "ok": verdict.ok, "jobs": jobs}


def run_plan_stage(plan: dict, out: str, model_set: str) -> dict:
    from fourloops import pages
    from fourloops.plan import benchmark_seconds

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


STAGE = Stage(name="report", rules=("ladder_table", "run_plan"), profile="desk")
