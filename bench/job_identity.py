"""Every job of the workflow's DAG as fourloops sees it, as JSON, without running any job.

    .venv/bin/python bench/job_identity.py --out DIR [--repo PATH] [--sets smoke,sizing,sizing-gpu,real]

For each model set (the smoke set: `--workflow-profile profiles/smoke`; the sizing set: profiles/sizing and
profiles/sizing-gpu; the real set: the default profile with the generator's hub revision pinned, as a real run needs)
one child process runs Snakemake's CLI in-process as a dry-run on an empty working directory, stops it where it would
schedule (as `fourloops plan` does: fourloops.plan.run) and writes DIR/<set>.json:
- per job of the DAG, sorted by rule and wildcards: its rule, wildcards, params (the lineage param among them, as
  Snakemake evaluated it), inputs, outputs, logs, benchmark, resources (the asks and profile tag), why it runs, and
  fourloops' own view of it: its lineage digest and its code digest;
- the plan of the run on its config machine, on a RunPod pod and on the SLURM cluster (fourloops.plan.build: where
  each job runs, its walls there, its time), the report's plan (fourloops.plan.planned), and each job's SLURM
  request under the slurm executor;
- the checks before the first job (the config problems, the preflight, the space check), the files the requested DAG
  reads or writes, and the words for targets and options no rule makes.

`--repo` names the checkout whose Snakefile and src/ are dumped (its src/ goes first on the import path). Every child
runs with PYTHONHASHSEED=0, so set orders are the same in every dump.

    .venv/bin/python bench/job_identity.py --out DIR --before COMMIT --files PATH...

proves a change to PATH... moved no job's identity while others edit the rest of the tree: the working tree is
copied once to a scratch folder, PATH... are put back as they were at COMMIT (a file COMMIT lacks is removed) and
dumped to DIR/before, then PATH... as they are in the working tree are copied in and dumped, from the same folder, to
DIR/after; every other file is the same bytes in both. It prints `identical` (exit 0) or the parts that differ.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMIT = "0f72fa92564d9f8ba76f53fcc3c05aca2372458f"  # a hub commit's form (tests/conftest.py's pinned())

# set -> (workflow profile, extra arguments); the real set's pinned revision is written next to its working directory
SETS = {
    "smoke": ("smoke", []),
    "sizing": ("sizing", []),
    "sizing-gpu": ("sizing-gpu", []),
    "real": ("default", ["--configfile", "{pinned}"]),
}
# targets no rule makes, or options naming no rule: the words the run refuses them with
UNKNOWN_TARGETS = ["results/generate/Z/az000.png", "results/render/az017.png", "results/nothing.csv", "genrate"]


def targets(repo: Path) -> list[str]:
    """Every target rule and, for each style and the HEF model of the repository's config (its schema's defaults
    where config.yaml names none), their tables."""
    import yaml

    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    schema = {p.stem: yaml.safe_load(p.read_text()) for p in (repo / "config" / "schema.d").glob("*.yaml")}

    def value(section: str, key: str):
        return (config.get(section) or {}).get(key, schema[section]["properties"][key].get("default"))

    model = value("hef", "model")
    return ["all", "probe", "report_contents", "publish", "results/lora/camera.safetensors",
            *[f"results/{t}/{s}.csv" for s in sorted(value("restyle", "styles")) for t in ("drift", "grades")],
            f"results/hef/{model}.latency.csv", f"results/hef/{model}.run2.json"]


def _plain(value):
    """JSON for Snakemake's objects (Namedlist, IOFile, ...): lists and dicts of strings and numbers."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)


def _reason(text: str) -> list:
    """Snakemake's reason, its file lists sorted (it prints them in a set's order, which varies between processes)."""
    out = []
    for part in text.split("; "):
        head, sep, files = part.partition(": ")
        out.append([head, sorted(files.split(", "))] if sep else [head])
    return out


def dump(workflow, requested: list[str]) -> dict:
    """(inside the dry-run, at the scheduler) The identity of every job of `workflow`'s DAG, and fourloops' plan."""
    from fourloops import plan
    from fourloops.smk import workflow_of

    dag = workflow.dag
    view = workflow_of(workflow)
    # the view's parts (fourloops.smk.Workflow's jobs, placement and admission), or the one class it was before it
    # was split by concern: a dump of a commit before the split answers the same questions
    split = hasattr(view, "admission")
    graph, placement, admission = (view.jobs, view.placement, view.admission) if split else (view, view, view)
    if split:
        from fourloops import targets

        def unknown_target(t):
            return targets.unknown_target(workflow, graph.producers, t)
    else:
        unknown_target = view.unknown_target
    jobs = []
    for job in dag.jobs:
        rule, wc = job.rule.name, dict(job.wildcards.items())
        params = dict(job.params.items())
        entry = {
            "rule": rule, "wildcards": wc, "params": params,
            "input": list(job.input), "output": list(job.output), "log": list(job.log),
            "benchmark": job.benchmark, "resources": dict(job.resources.items()),
            "needrun": dag.needrun(job), "reason": sorted(dag.reason(job).get_names()),
        }
        if job.rule.output:
            entry["lineage"] = graph.lineage(rule, wc)
            entry["code"] = graph.code(rule)
            entry["fourloops_params"] = graph.params(rule, wc)
            entry["fourloops_inputs"] = graph.inputs(rule, wc)
            entry["fourloops_outputs"] = graph.outputs(rule, wc)
            entry["producers"] = {p: graph.producers(p) for p in graph.inputs(rule, wc)}
        if job.rule.output or not job.rule.norun:  # a job with work of its own (target rules have no stage)
            entry["profile"] = placement.profile(rule, wc)
        jobs.append(_plain(entry))
    jobs.sort(key=lambda j: (j["rule"], sorted(j["wildcards"].items())))
    out = {"jobs": jobs}
    out["requested_paths"] = sorted(graph.requested_paths(requested))
    out["unknown_targets"] = {t: unknown_target(t) for t in UNKNOWN_TARGETS}
    out["unmade_artifacts"] = view.unmade_artifacts({"artifacts": [{"path": "results/nothing.csv"},
                                                                   {"path": "results/ladder.csv"}]})
    out["machine_names"] = view.machine_names()
    out["local_rules"] = sorted(placement.local_rules())
    out["executor"] = placement.executor()
    out["config_problems"] = admission.config_problems(dag)
    out["preflight_problems"] = admission.preflight_problems(dag)
    out["space_problems"] = admission.space_problems(dag)
    out["local_jobs"] = sorted(str(j) for j in admission.local_jobs(dag))
    out["pending"] = sorted(_plain([p.rule, p.output, p.profile, p.wildcards, p.local, str(p.ask)])
                            for p in admission.pending(dag))
    out["planned"] = _plain(plan.planned(view, ["results/ladder.csv", "results/ladder.png"]))
    for machine in (None, "pod", "cluster"):
        built = plan.build(workflow, machine)
        built["jobs"] = sorted(built["jobs"], key=lambda j: j["output"])
        for j in built["jobs"]:
            j["reason"] = _reason(j["reason"])
        out[f"plan {machine or 'config machine'}"] = _plain(built)
        if machine == "cluster":  # the plugin's resources of each job, as the slurm executor would ask them
            out["slurm_requests"] = {f"{j.rule.name} {sorted(j.wildcards.items())}":
                                     _plain(placement.slurm_request(j.rule.name, dict(j.wildcards.items())))
                                     for j in sorted(dag.jobs, key=lambda j: (j.rule.name, sorted(j.wildcards.items())))
                                     if j.rule.output or not j.rule.norun}
    return out


def child(out: Path, repo: Path, argv: list[str], requested: list[str]) -> int:
    """(child process) The dry-run of `argv`, stopped at the scheduler, its dump written to `out`."""
    import snakemake.cli
    import snakemake.workflow as smk_workflow

    result = {}

    class _Dump:
        def __init__(self, workflow, *args, **kwargs):
            # Snakemake keeps the pending jobs in a set of objects hashed by address, so their order (the plan's rows,
            # the pod bill's job order) changes with any change to what the process allocated, code unchanged: they
            # are handed to fourloops sorted by rule and wildcards
            needrun = workflow.dag.needrun_jobs
            workflow.dag.needrun_jobs = lambda exclude_finished=True: iter(sorted(
                needrun(exclude_finished), key=lambda j: (j.rule.name, sorted(j.wildcards.items()))))
            result["dump"] = dump(workflow, requested)

        def schedule(self):
            return True

    smk_workflow.JobScheduler = _Dump
    try:
        snakemake.cli.main(["--dry-run", *requested, "--quiet", "all", "-s", str(repo / "Snakefile"), *argv])  # --configfile takes every word after it
    except SystemExit as exit_:
        if exit_.code:
            print(f"job_identity: the dry-run failed ({exit_.code})", file=sys.stderr)
            return 1
    if "dump" not in result:
        print("job_identity: the dry-run scheduled nothing", file=sys.stderr)
        return 1
    out.write_text(json.dumps(result["dump"], indent=1, sort_keys=True) + "\n")
    return 0


def compare(out: Path, before: str, files: list[str], chosen: list[str]) -> int:
    """Dump the working tree with `files` as at commit `before`, then as they are: the same folder, every other file
    the same bytes (see the module's docstring)."""
    import shutil

    scratch = Path(tempfile.mkdtemp(prefix="fourloops-identity-tree-"))
    tree = scratch / "repo"
    try:
        listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                                capture_output=True).stdout.decode().split("\0")
        for name in filter(None, listed):
            src = REPO / name
            if src.is_file() and not name.startswith(".venv/"):
                (tree / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, tree / name)
        for name in files:
            old = subprocess.run(["git", "show", f"{before}:{name}"], cwd=REPO, capture_output=True)
            if old.returncode:
                (tree / name).unlink(missing_ok=True)
            else:
                (tree / name).parent.mkdir(parents=True, exist_ok=True)
                (tree / name).write_bytes(old.stdout)
        argv = [sys.executable, __file__, "--repo", str(tree), "--sets", ",".join(chosen)]
        if subprocess.run([*argv, "--out", str(out / "before")]).returncode:
            return 1
        for name in files:
            if (REPO / name).exists():
                (tree / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, tree / name)
            else:
                (tree / name).unlink(missing_ok=True)
        if subprocess.run([*argv, "--out", str(out / "after")]).returncode:
            return 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    differ = []
    for name in chosen:
        a, b = (json.loads((out / side / f"{name}.json").read_text()) for side in ("before", "after"))
        differ += [f"{name}: {key}" for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]
        same = (out / "before" / f"{name}.json").read_bytes() == (out / "after" / f"{name}.json").read_bytes()
        print(f"{name}: {len(a['jobs'])} jobs, {'byte-identical' if same else 'DIFFERENT'}")
    print("identical" if not differ else "different:\n  " + "\n  ".join(differ))
    return 1 if differ else 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        out, repo, n = Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
        rest = sys.argv[5:]
        return child(out, repo, rest[:n], rest[n:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the folder the <set>.json dumps go to")
    ap.add_argument("--repo", default=str(REPO), help="the checkout to dump (its Snakefile and src/)")
    ap.add_argument("--sets", default=",".join(SETS), help=f"of {list(SETS)}")
    ap.add_argument("--before", help="a commit: dump the working tree with --files as they were there, then as they are")
    ap.add_argument("--files", nargs="+", default=[], help="with --before: the changed files, relative to the repository")
    args = ap.parse_args()
    repo, out = Path(args.repo).resolve(), Path(args.out)
    chosen = [s for s in args.sets.split(",") if s]
    if unknown := [s for s in chosen if s not in SETS]:
        raise SystemExit(f"--sets {unknown}: allowed: {list(SETS)}")
    if args.before:
        if not args.files:
            raise SystemExit("--before needs --files: the files whose change is checked")
        return compare(out, args.before, args.files, chosen)
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": os.pathsep.join(
        [str(repo / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("FOURLOOPS_INVOCATION", None)
    requested = targets(repo)
    failed = 0
    for name in chosen:
        profile, extra = SETS[name]
        with tempfile.TemporaryDirectory(prefix=f"fourloops-identity-{name}-") as tmp:
            pinned = Path(tmp) / "pinned.yaml"
            pinned.write_text(f"generator:\n  revision: {COMMIT}\n")
            argv = ["--workflow-profile", str(repo / "profiles" / profile), "--directory", str(Path(tmp) / "work"),
                    *[a.format(pinned=pinned) for a in extra]]
            proc = subprocess.run([sys.executable, __file__, "--child", str(out / f"{name}.json"), str(repo),
                                   str(len(argv)), *argv, *requested], capture_output=True, text=True, env=env,
                                  cwd=repo)  # a profile's configfiles are relative to it
        if proc.returncode:
            failed += 1
            print(f"{name}: failed\n{proc.stdout[-3000:]}{proc.stderr[-6000:]}", file=sys.stderr)
            continue
        jobs = json.loads((out / f"{name}.json").read_text())["jobs"]
        print(f"{name}: {len(jobs)} jobs -> {out / f'{name}.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
