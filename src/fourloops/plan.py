"""`fourloops plan`: every job a run would execute, why, where it fits, and what it will cost.

Runs Snakemake's own CLI in-process as a dry-run (same profiles, config and DAG as `snakemake -n`),
stops it just before scheduling, and reads the DAG: Snakemake's reasons, the jobs' asks (the same
`check_walls` the real run's onstart uses), benchmark history for the time.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import os
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fourloops import asks, machines, podbill, records, refusal, walls
from fourloops.stage import stage_for
from fourloops.tables import format_table
from fourloops.tables import hms as _hms

REPO = Path(__file__).resolve().parents[2]


@dataclass
class PlannedJob:
    rule: str
    output: str
    wildcards: dict
    reason: str
    why: str
    profile: str
    machine: str
    verdict: str
    refused_walls: list
    vram_gib: float
    vram_source: str
    seconds: float
    seconds_source: str
    cost_usd: float
    model: str = ""  # the models.yaml key the job loads
    ram_gib: float = 0.0  # the system-memory wall's ask, beside the VRAM one (bench/cap24_matrix.py reads both)
    ram_source: str = ""
    needs: list = field(default_factory=list)  # outputs of the planned jobs this one waits for
    in_mb: float = 0.0  # what a pod job moves up and down (existing files at their size, others pod_life file_mb)
    out_mb: float = 0.0
    partition: str = ""  # on a SLURM cluster: "partition <name>", "here (desk)" or "refused"
    levers: dict | None = None  # a refused job: what would make it fit (fourloops.levers.Levers.as_dict)
    rented: bool = False  # the RunPod executor runs it on a rented pod (a pod job, the container's on a pod host)
    batch: int = 1  # items a call on the machine it runs on (fourloops.batching: `auto` resolved there)


def planned(view, targets: list[str]) -> dict:
    """Every job upstream of `targets`, checked against the walls where the run's own check places it and asked as it
    asks it (fourloops.admission.Admission.pending_job and check: under the run's executor, a SLURM cluster's job on its
    partition or the cluster's submit_host, a rented pod's apart from the jobs this Snakemake starts): plain values,
    for a rule's params (the report's run_plan rule)."""
    found: dict[tuple, tuple[str, dict]] = {}
    for path in sorted(view.jobs.requested_paths(targets)):
        for rule, wildcards in view.jobs.producers(path):
            found.setdefault((rule, tuple(sorted(wildcards.items()))), (rule, wildcards))
    pending, benchmarks = [], {}
    for rule, wildcards in sorted(found.values(), key=lambda x: (x[0], sorted(x[1].items()))):
        snakerule = view.wf.get_rule(rule)
        output = str(snakerule.expand_output(wildcards)[0][0])
        bench = snakerule.expand_benchmark(wildcards)
        benchmarks[output] = str(bench) if bench is not None else ""
        pending.append(view.admission.pending_job(rule, wildcards, output))
    verdict = view.admission.check(pending)
    placed = getattr(verdict, "placed", None)  # a SLURM cluster: its partitions and submit_host
    jobs = []
    for job, rows in verdict.checked:
        where = verdict.on[job.output]  # the machine (partition, submit_host, pod) its rows are of
        refused = [r.wall for r in rows if not r.ok]
        jobs.append({
            "rule": job.rule, "output": job.output, "profile": job.profile,
            "machine": _rented(where.label()) if job.context is not None and job.context.rented else where.label(),
            "hourly_usd": where.hourly_usd, "walls": [asdict(r) for r in rows],
            "verdict": "fits" if not refused else "refused: " + ", ".join(refused),
            "forecast_seconds": job.ask.seconds.value, "forecast_source": job.ask.seconds.source,
            "benchmark": benchmarks[job.output],
        })
    return {"target": placed.cluster.label() if placed else verdict.machine.label(), "ok": verdict.ok, "jobs": jobs}


def build(workflow, machine_name: str | None, runpod: dict | None = None, executor: str | None = None) -> dict:
    """The plan of a workflow whose DAG is built (called from inside Snakemake's dry-run): each job where the run
    would place it. `executor` is the one the run would use (a profile's `executor:`; the dry-run has its own);
    `machine_name` the machine the run targets (default: config machine, or under the SLURM executor its cluster).
    `pod` plans the RunPod run from this machine: its pod jobs on a rented pod, the rest on config machine."""
    from fourloops.smk import workflow_of

    dag = workflow.dag
    view = workflow_of(workflow)
    if executor is not None:
        view.placement.planned_executor = executor
    # the RunPod run planned from another profile: its own profile (profiles/pod) declares the pod's card, not this
    # invocation's --resources
    own_resources = not (machine_name == "pod" and view.placement.executor() != "runpod")
    if machine_name == "pod":
        view.placement.planned_executor = "runpod"
        machine_name = view.config["machine"]
    elif machine_name in machines.clusters(view.machines):  # the SLURM run on that cluster
        view.placement.planned_executor = "slurm"
    if machine_name is None or (view.placement.executor() == "slurm"
                                and machine_name not in machines.clusters(view.machines)):
        # as the run's own wall check: config machine, or under the SLURM executor its cluster (a job the cluster
        # cannot take, the desk's Hailo USB, stays here)
        machine_name = view.placement.slurm_cluster() or machine_name or view.config["machine"]
    machine_name = view.placement.here(machine_name)  # under the RunPod executor a cluster runs nothing: its rest run here
    shown = machine_name
    view.placement.set_target(machine_name)
    verdict = view.admission.check_walls(dag, machine_name, own_resources=own_resources)
    placed = getattr(verdict, "placed", None)  # a SLURM cluster: the partition per job
    table = view.machines
    placement = verdict.placement  # profile tag -> machine (a pod job on the pod under the RunPod executor)
    jobs = {id(j): j for j in dag.needrun_jobs()}
    by_output = {}
    for j in jobs.values():
        by_output[str(j.output[0]) if len(j.output) else j.rule.name] = j
    rows: list[PlannedJob] = []
    totals: dict[str, dict] = {}
    found = refusal.levers_of(verdict, table) if not verdict.ok else {}  # refused jobs only: the dry-run pays nothing else
    life = podbill.load_life() if view.placement.executor() == "runpod" and not placed else None
    for pending, checks in verdict.checked:
        ask = pending.ask
        job = by_output.get(pending.output)
        bench = str(job.benchmark) if job is not None and job.benchmark else None
        hist = records.benchmark_seconds(bench)
        secs, src = (hist, f"benchmark history {bench}") if hist is not None else (ask.seconds.value, ask.seconds.source)
        # priced at the hourly rate of the machine it runs on (a SLURM cluster's partitions bill nothing here)
        where = walls.target_for(pending, table, machine_name, placement)
        cost = secs / 3600.0 * where.hourly_usd if not placed else 0.0
        refused = [asdict(r) for r in checks if not r.ok]
        rented = bool(placement) and placement.get(pending.profile) == "pod"
        runs_on = _runs_on(placed.where[pending.output]) if placed else where.name
        moved = _moved_mb(job, life) if rented and life is not None and job is not None else (0.0, 0.0)
        rows.append(PlannedJob(
            rule=pending.rule, output=pending.output, wildcards=pending.wildcards,
            reason=str(dag.reason(job)) if job is not None else "",
            why=", ".join(sorted(dag.reason(job).get_names())) if job is not None else "", profile=pending.profile,
            machine=runs_on,
            verdict="fits" if not refused else "REFUSED: " + ", ".join(r["wall"] for r in refused),
            refused_walls=refused, vram_gib=round(ask.vram_mb / 1024.0, 2), vram_source=ask.vram.source,
            seconds=round(secs, 1), seconds_source=src, cost_usd=round(cost, 4),
            model=ask.model, ram_gib=round(ask.mem_mb / 1024.0, 2), ram_source=ask.ram.source,
            needs=_needs(dag, job, jobs), in_mb=round(moved[0], 3), out_mb=round(moved[1], 3),
            partition=placed.where[pending.output] if placed else "",
            levers=found[(pending.rule, tuple(checks))].as_dict() if (pending.rule, tuple(checks)) in found else None,
            rented=rented, batch=int(getattr(ask, "batch", 1) or 1),
        ))
        # a rented pod is not the pod a run on one starts its own jobs on (config machine pod): a total of its own
        t = totals.setdefault(_rented(runs_on) if rented else runs_on, {"jobs": 0, "seconds": 0.0, "cost_usd": 0.0})
        t["jobs"] += 1
        t["seconds"] += secs
        t["cost_usd"] += cost
    bill = None
    if life is not None and any(r.rented for r in rows):
        # the executor's settings (machines.yaml pod.runpod, or the running executor's own: `runpod`)
        settings = {**(table["pod"].get("runpod") or {}), **(runpod or {})}
        bill = pod_bill(rows, life, view.facts, Path(workflow.basedir), float(table["pod"].get("hourly_usd", 0.0)),
                        fetch_at=settings.get("fetch_at", "container"),
                        poll_s=float(settings.get("poll_s", podbill.DEFAULT_POLL_S)), hef=view.config.get("hef"))
    return {
        "machine": shown,
        "executor": view.placement.executor(),
        "ok": verdict.ok,
        "pod_bill": bill,
        "jobs": [asdict(r) for r in rows],
        "totals": {k: {**v, "seconds": round(v["seconds"], 1), "cost_usd": round(v["cost_usd"], 4)} for k, v in totals.items()},
        "refusals": ((refusal.cluster_report(placed, table) if placed else refusal.report(verdict, table, found))
                     if not verdict.ok else ""),
        "config_problems": view.admission.config_problems(dag),  # a run refuses these before any job, wherever it runs
        "gate": next((stage_for(g.rule).preview(g.params, Path.cwd()) for g, _ in verdict.checked
                      if stage_for(g.rule).preview is not None), None),
    }


def _rented(where: str) -> str:
    """A machine the RunPod executor rents, as the plan names it (its rows' `runs on`, its totals)."""
    return f"{where} (rented)"


def _runs_on(where: str) -> str:
    """A SLURM placement as a totals key: "partition gpu" as it is, "here (desk)" as the desk."""
    return where[len("here ("):-1] if where.startswith("here (") else where


def _needs(dag, job, planned: dict) -> list[str]:
    if job is None:
        return []
    deps = dag.dependencies.get(job, {})
    return sorted(str(d.output[0]) if len(d.output) else d.rule.name for d in deps if id(d) in planned)


def _moved_mb(job, life) -> tuple[float, float]:
    """MB a pod job's inputs and outputs (with log and benchmark) move: a file that exists at its size, else
    pod_life's file_mb."""

    def mb(paths) -> float:
        total = 0.0
        for f in paths:
            p = Path(str(f))
            if p.is_dir():
                total += sum(q.stat().st_size for q in p.rglob("*") if q.is_file()) / 1e6
            else:
                total += p.stat().st_size / 1e6 if p.exists() else life.file_mb
        return total

    products = [*job.output, *job.log, *([job.benchmark] if job.benchmark else [])]
    return mb(job.input), mb(products)


def pod_bill(rows: list[PlannedJob], life, facts: dict, basedir: Path, hourly_usd: float,
             fetch_at: str = "container", poll_s: float = podbill.DEFAULT_POLL_S, hef: dict | None = None) -> dict:
    """The whole bill of the plan's pod jobs on one pod, in the order a pool of one takes them (dependencies
    first, then the jobs whose model downloads first, then the plan's order): fixed costs, jobs, transfers,
    teardown (fourloops.podbill.forecast); with a container job on the pod, the DFC's venv set-up, its upload
    from the sizes of `hef`'s dfc_wheel (and dfc_wheelhouse) now."""
    from snakemake_executor_plugin_runpod.transport import source_files

    # the jobs on a rented pod: those tagged pod, and the container's under container.host: pod (the DFC's compile)
    models = podbill.fetch_order([(r.output, "pod" if r.rented else r.profile, r.model, r.needs)
                                  for r in rows])  # the executor's
    pod = sorted((r for r in rows if r.rented),  # stable: then the plan's order
                 key=lambda r: models.index(r.model) if r.model in models else 0)
    done = {r.output for r in rows if not r.rented}
    ordered = []
    while pod:  # a pod job after the pod jobs it needs
        nxt = next((r for r in pod if all(n in done or n not in {p.output for p in pod} for n in r.needs)), pod[0])
        pod.remove(nxt)
        done.add(nxt.output)
        ordered.append(nxt)
    jobs = [podbill.PodJob(r.output, r.seconds, r.model, r.in_mb, r.out_mb, container=r.profile == "container")
            for r in ordered]
    weights = {j.model: podbill.weights_gb(facts, j.model) for j in jobs if j.model}
    repo_mb = podbill.tree_mb(basedir, source_files(basedir))
    dfc = podbill.dfc_upload(hef or {}) if any(j.container for j in jobs) else None
    bill = podbill.forecast(jobs, life, weights, repo_mb=repo_mb, hourly_usd=hourly_usd, fetch_at=fetch_at,
                            poll_s=poll_s, dfc=dfc)
    bill["order"] = [j.name for j in jobs]
    bill["fetch_order"] = models
    return bill


def _usd(cost: float) -> str:
    """A job's or a machine's cost: '-' for none, '<$0.01' for one that rounds to nothing."""
    return "-" if not cost else (f"${cost:.2f}" if cost >= 0.005 else "<$0.01")


def _verdict(j: dict) -> str:
    """A row's verdict; a refused row adds its first lever (the refusals below list them all)."""
    return j["verdict"] + (f"; {j['levers']['short']}" if j.get("levers") else "")


def format_plan(plan: dict) -> str:
    if not plan["jobs"]:
        return f"plan on {plan['machine']}: nothing to be done"
    head = ("rule", "output", "profile", "runs on", "batch", "walls there", "time", "cost", "why")

    def runs_on(j: dict) -> str:
        return j.get("partition") or (_rented(j["machine"]) if j.get("rented") else j.get("machine", ""))

    rows = [(j["rule"], j["output"], j["profile"], runs_on(j), str(j.get("batch", 1)), _verdict(j), _hms(j["seconds"]),
             _usd(j["cost_usd"]), j["why"]) for j in plan["jobs"]]
    executor = plan.get("executor")
    lines = [f"plan of a run on {plan['machine']}" + (f" under the {executor} executor" if executor in (
        "runpod", "slurm") else "") + ":", format_table(head, rows), "", "totals per machine:"]
    width = max((len(w) for w in plan["totals"]), default=10)
    for where, t in sorted(plan["totals"].items()):
        cost = f", {_usd(t['cost_usd'])}" if t["cost_usd"] else ""
        lines.append(f"  {where:{width}s} {t['jobs']:4d} jobs  {_hms(t['seconds'])}{cost}")
    bill = plan.get("pod_bill")
    if bill:
        idle = bill["idle_s"]
        lines += ["", f"pod bill forecast (one pod, config/pod_life.yaml): {_hms(bill['billed_s'])} billed "
                      f"${bill['cost_usd']:.2f} at ${bill['hourly_usd']:.2f}/h; GPU-busy {_hms(bill['gpu_s'])} "
                      f"({bill['billed_s'] / bill['gpu_s']:.2f}x); floor {_hms(bill['floor_s'])} "
                      f"(billed/floor {bill['billed_s'] / bill['floor_s']:.3f})" if bill["gpu_s"] else "",
                  "  fixed per pod: " + ", ".join(f"{c} {idle[c]:.0f} s" for c in ("pull", "ready", "setup", "download"))
                  + f"; transfers {idle['transfer']:.0f} s (repo {bill['repo_mb']:.0f} MB); teardown {idle['teardown']:.0f} s"
                  + ("; weights " + ", ".join(f"{m} {gb:.1f} GB" for m, gb in bill["weights_gb"].items())
                     if bill["weights_gb"] else "")]
        if bill.get("dfc_venv"):
            lines.append("  " + podbill.dfc_venv_line(bill["dfc_venv"]) + "; billed under the executor's calls "
                         f"({idle['calls']:.0f} s in all)")
    not_fresh = Counter(j["rule"] for j in plan["jobs"]
                        if any(mark in j.get("seconds_source", "") for mark in asks.WARMUP_NOT_FRESH))
    if not_fresh:
        lines += ["", "warm-up: the forecasts of " + ", ".join(f"{r} ({n} job{'s' * (n > 1)})" for r, n in
                                                               sorted(not_fresh.items()))
                  + " take it from a probe made in a machine's first process of its model, which compiled kernels "
                  "then (or its record does not say): a floor, or high for a LoRA step. Running the probes once more "
                  "on that machine (`snakemake probe --forcerun probe_model`) measures a fresh process's."]
    if plan.get("gate"):
        lines += ["", *_gate_lines(plan["gate"])]
    if plan["refusals"]:
        lines += ["", plan["refusals"]]
    if plan.get("config_problems"):
        lines += ["", "a run would not start until the config names its weights otherwise:"] + [
            f"  - {p}" for p in plan["config_problems"]]
    return "\n".join(lines)


def _gate_lines(gate: dict) -> list[str]:
    """The publication gate's part of a plan: what it judges and what it would refuse as the files are now."""
    from fourloops.gate.refusals import RULES

    arts = gate["artifacts"]
    lines = [f"publish: the gate builds nothing; it publishes all {len(arts)} artifact(s) of publish.artifacts to "
             "results/published/ or none: " + ", ".join(
                 f"{a['path']} ({a['kind']}{'' if a['exists'] else ', missing'})" for a in arts)]
    if gate["refusals"]:
        lines.append(f"  as the files are now it would refuse ({len(gate['refusals'])}), and exit 1:")
        lines += [f"  - {r['artifact']}: rule {r['rule']} ({RULES[r['rule']]}): {r['evidence']}; {r['fix']}"
                  for r in gate["refusals"]]
    else:
        lines.append("  as the files are now, rules 1-5, 7 and 8 pass")
    lines.append("  rule 6 (an artifact Snakemake would rebuild is refused) is judged by the gate's own dry-run when "
                 "it runs: build first (`snakemake " + " ".join(a["path"] for a in arts) + "`)")
    return lines


INVALID_CONFIG = "invalid config (nothing was run or written):"


def invalid_config(log: str, workflow_dir: Path = REPO) -> list[str]:
    """What the workflow refused while it was read, before any job (an invalid config value, a model set its working
    directory does not hold, a machines or models file's error: each names its key or file, the value and what is
    allowed), from Snakemake's log: the lines of a WorkflowError raised in a file of the workflow, without their
    "invalid config" heading and Snakemake's "File ..., line N" trailer. [] for anything else."""
    lines = log.splitlines()
    head = f'WorkflowError in file "{workflow_dir}{os.sep}'
    at = next((i for i, line in enumerate(lines) if line.startswith(head)), None)
    if at is None:
        return []
    out = []
    for line in lines[at + 1:]:
        if line.lstrip().startswith('File "') or not line.strip():
            break
        if line.strip() != INVALID_CONFIG:
            out.append(line.strip())
    return out


def run(snakemake_args: list[str], machine_name: str | None) -> dict:
    """Dry-run Snakemake's CLI with `snakemake_args`, capture the plan before scheduling."""
    import snakemake.api
    import snakemake.cli
    import snakemake.workflow as smk_workflow

    result: dict = {}
    real = smk_workflow.JobScheduler

    class _Stop:
        def __init__(self, workflow, *args, **kwargs):
            try:
                result["plan"] = build(workflow, machine_name, executor=result.get("executor"))
            except (podbill.PodLifeError, machines.MachinesError) as err:  # words, no traceback
                result["problem"] = str(err)

        def schedule(self):
            return True

    # the executor the run would use (a profile's `executor:`): a dry-run replaces it with its own, after Snakemake
    # has resolved it from the command line and the profiles
    real_execute = snakemake.api.DAGApi.execute_workflow

    def execute_workflow(self, *args, **kwargs):
        result["executor"] = kwargs.get("executor", args[0] if args else "local")
        result["workflow"] = self.workflow_api._workflow
        return real_execute(self, *args, **kwargs)

    smk_workflow.JobScheduler = _Stop
    snakemake.api.DAGApi.execute_workflow = execute_workflow
    # the workflow sets the environment of the jobs it would start (torch's allocator variable: rules/common.smk);
    # a dry run starts none, so the caller's environment is left as it was
    environ = dict(os.environ)
    # Snakemake's own log goes to a scratch file, shown only when it fails before the plan.
    import tempfile

    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as scratch:
        os.dup2(scratch.fileno(), 1)
        os.dup2(scratch.fileno(), 2)
        code = 0
        try:
            snakemake.cli.main(["--dry-run", "--quiet", "all", *snakemake_args])
        except SystemExit as exit_:
            code = exit_.code or 0
        finally:
            smk_workflow.JobScheduler = real
            snakemake.api.DAGApi.execute_workflow = real_execute
            os.environ.clear()
            os.environ.update(environ)
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        scratch.seek(0)
        log = scratch.read()
        locked = "Directory cannot be locked" in log
        if locked:  # a dry-run only warns; the run itself would refuse to start
            sys.stderr.write(
                "plan: the working directory is locked: another Snakemake runs there, or one was killed; a run "
                "would not start. If none is running, unlock it with the same profile and directory: "
                "snakemake --unlock [--workflow-profile ...] [--directory ...]\n"
            )
        if "problem" in result:
            sys.stderr.write(f"fourloops plan: nothing was planned:\n  {result['problem']}\n")
            raise SystemExit(2)
        if "plan" not in result and code:
            snakefile = snakemake_args[snakemake_args.index("-s") + 1] if "-s" in snakemake_args else REPO / "Snakefile"
            problems = invalid_config(log, Path(os.path.abspath(snakefile)).parent)
            if problems:  # the workflow's own words (key, value, what is allowed), as `fourloops plan`'s own checks
                sys.stderr.write("fourloops plan: nothing was planned:\n  " + "\n  ".join(problems) + "\n")
                raise SystemExit(2)
            sys.stderr.write(log[-8000:])
            raise SystemExit(code)
    if "plan" not in result:  # nothing to be done: Snakemake returned before scheduling
        if machine_name is None and "workflow" in result:  # the run's config machine (machines.yaml may rename desk)
            from fourloops.smk import workflow_of

            machine_name = workflow_of(result["workflow"]).config["machine"]
        result["plan"] = {"machine": machine_name, "ok": True, "jobs": [], "totals": {}, "refusals": "",
                          "pod_bill": None}
    result["plan"]["locked"] = locked
    return result["plan"]
