"""Dry-run cost of the workflow against bare Snakemake on the same DAG, from 22 to about 500 jobs.

    .venv/bin/python bench/dryrun.py [--repeat 3] [--sizes 22,100,500] [--warm 22,100,500] [--warm-dir DIR]

The series (SERIES) grows conditions x styles x azimuths: the default config's 22 jobs of
`snakemake -n results/ladder.csv`, then more conditions, restyle styles (their drift and grades tables are
targets too) and azimuths (more files per job), all on the smoke profile. A point of --sizes is a size of the series
or a shape CxSxA of its own (conditions x styles x azimuths): 40x0x24 and 40x0x72 are the same 130 jobs with 24 and
72 views per generate job (and as many keypoint files per keypoints job, fit inputs per fit job).

Bare Snakemake runs a Snakefile made from fourloops' own cold dry-run: the same jobs with the same number
of input, output, log and benchmark files, the same edges between them, each job a `touch`, under the same
profiles. So the difference is what fourloops adds: its imports, config checks, stage registry, lineage,
the output check on the DAG's jobs and the jobs' asks.
- cold: a fresh, empty working directory for every run;
- warm: after a complete run (fourloops: the smoke run, so every output is checked against its provenance
  record; bare: its touch run). Those directories are built once under --warm-dir and reused.
Every command runs with Python's bytecode cache on, as a user's does (PYTHONDONTWRITEBYTECODE, if set here,
is unset for them). `fourloops plan` (same DAG, walls included) runs beside `snakemake -n`. The runs are interleaved (fourloops,
bare, plan for each size and state, then the next repeat): medians, and ratios of the medians; on a shared
machine compare the ratios, not the seconds. Each run's CPU seconds (user + system, from the kernel's
accounting of the child) are printed beside its wall seconds: a dry-run runs on one core, so on a quiet
machine they agree, and under other work's load the CPU ratio is the steadier one.

Phases: one more `snakemake -n` and one `fourloops plan` per size and state, in a child process that times
fourloops' parse-time functions (config: the config, models and machines checks; registry: the stage
declarations; lineage; records: the provenance records read; output check: the DAG's files
and the sha256 check; walls: the asks, resources and wall check).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake")
FOURLOOPS = str(BIN / "fourloops")
SMOKE = str(REPO / "profiles" / "smoke")
DESK = str(REPO / "profiles" / "default")  # the workflow profile fourloops' Snakefile gets; bare gets it too
TOUCH = Path(__file__).resolve().with_name("dryrun_touch.py")  # every bare job's script
# The commands run as a user's Python runs them: compiled modules kept in __pycache__ and reused. With
# PYTHONDONTWRITEBYTECODE set (some sandboxes and CI images set it), fourloops' own source (src/) would be
# compiled again by every run while Snakemake's, compiled when pip installed it, is not: a cost bare never pays.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

# jobs -> (conditions, restyle styles, azimuths). 22: the default config, no --configfile.
# Jobs: 10 + 3 per condition + (1 + 4 per style when there are styles).
SERIES = {22: (4, 0, 8), 100: (19, 8, 16), 500: (123, 30, 24)}
# What the smoke jobs of the larger DAGs compute: as small as the schema allows (a warm directory is a
# complete run); none of it changes the DAG.
CHEAP_SMOKE = {"generator_steps": 1, "generator_size": 32, "keypoints_resolution": 96, "scorer_max_new_tokens": 1}

# fourloops' parse-time work, by phase: (module, attribute). A call inside another phase's counts in its own.
PHASES = {
    "config": [("fourloops.config", "configfile_problems"), ("fourloops.config", "schema_with_slices"),
               ("fourloops.config", "check_config"), ("fourloops.smk", "check_model_set"),
               ("fourloops.asks", "load_facts"), ("fourloops.machines", "load"),
               ("fourloops.hef", "precision_problem")],
    "registry": [("fourloops.stage", "registry")],
    "lineage": [("fourloops.jobgraph", "JobGraph.lineage")],
    "records": [("fourloops.records", "index"), ("fourloops.asks", "Measurements.load")],
    "output check": [("fourloops.targets", "unknown_target"), ("fourloops.targets", "unknown_rule_options"),
                     ("fourloops.jobgraph", "JobGraph.requested_paths"),
                     ("fourloops.smk", "Workflow.force_mismatched"), ("fourloops.verify", "check"),
                     ("fourloops.keep", "recover")],
    "walls": [("fourloops.placement", "Placement.ask"), ("fourloops.placement", "Placement.profile"),
              ("fourloops.placement", "Placement.slurm_request"), ("fourloops.admission", "Admission.check_walls"),
              ("fourloops.refusal", "levers_of")],
}


# ------------------------------------------------------------------------------------------ the DAGs
def shape_of(point: str) -> tuple[int, int, int]:
    """(conditions, styles, azimuths) of a point of --sizes: a size of SERIES, or CxSxA."""
    if point.isdigit() and int(point) in SERIES:
        return SERIES[int(point)]
    if m := re.fullmatch(r"(\d+)x(\d+)x(\d+)", point):
        c, s, a = (int(x) for x in m.groups())
        if c >= 4 and 1 <= a <= 360:
            return c, s, a
    raise SystemExit(f"--sizes {point}: allowed: a size of the series {sorted(SERIES)}, or CxSxA (conditions >= 4 x "
                     "styles x azimuths 1..360), e.g. 40x0x24")


def scale_config(conditions: int, styles: int, azimuths: int) -> tuple[dict | None, list[str]]:
    """The --configfile (None: the default config) and the targets of one point of the series."""
    if (conditions, styles, azimuths) == SERIES[22]:
        return None, ["results/ladder.csv"]
    az = sorted({round(i * 360 / azimuths) % 360 for i in range(azimuths)})
    extra = {f"X{i:03d}": {"references": [a for a in (0, 90, 180)[: 1 + i % 3]],
                           "prompt": "The same person, seen from a camera orbited to {azimuth} degrees.", "lora": False}
             for i in range(conditions - 4)}  # A, B, C, D stay (a --configfile merges over config.yaml)
    config = {"azimuths": az, "ladder": {"azimuths": az}, "conditions": extra, "smoke": dict(CHEAP_SMOKE)}
    names = [f"s{i:03d}" for i in range(styles)]
    if names:
        config["restyle"] = {"styles": {n: f"Repaint this image in style number {i}." for i, n in enumerate(names)},
                             "azimuths": az[:4]}
    return config, ["results/ladder.csv"] + [f"results/{t}/{n}.csv" for n in names for t in ("drift", "grades")]


_JOB = re.compile(r"^(?:local)?rule (\w+):$")
_FIELD = re.compile(r"^    (input|output|log|benchmark): (.*)$")


def dag_of(dry_run_stdout: str) -> list[dict]:
    """Each job of a `snakemake -n` listing: rule and its input, output, log and benchmark files."""
    jobs, job = [], None
    for line in dry_run_stdout.splitlines():
        if m := _JOB.match(line):
            job = {"rule": m.group(1), "input": [], "output": [], "log": [], "benchmark": []}
            jobs.append(job)
        elif job is not None and (m := _FIELD.match(line)):
            job[m.group(1)] = m.group(2).split(", ")
    return jobs


def bare_workflow(jobs: list[dict], targets: list[str]) -> tuple[str, list[str]]:
    """A Snakefile with the same jobs, files per job and edges as `jobs`, every job a script that touches
    its outputs, and the targets renamed to its files."""
    shapes: dict[tuple, str] = {}   # (rule, outputs, logs, benchmark) -> bare rule
    rename: dict[str, str] = {}
    members: dict[str, list] = {}
    for job in jobs:
        shape = (job["rule"], len(job["output"]), len(job["log"]), bool(job["benchmark"]))
        name = shapes.setdefault(shape, f"r{len(shapes)}")
        j = len(members.setdefault(name, []))
        members[name].append(job)
        for kind in ("output", "log"):
            for k, path in enumerate(job[kind]):
                rename[path] = f"{name}/{j}/{kind[0]}{k}"
    lines = ['wildcard_constraints:\n    j="[0-9]+"\n']
    for shape, name in shapes.items():
        _, n_out, n_log, bench = shape
        inputs = {j: [rename[p] for p in job["input"] if p in rename] for j, job in enumerate(members[name])}
        sources = sorted({p for job in members[name] for p in job["input"] if p not in rename})
        if sources:
            raise SystemExit(f"bench: inputs no job makes: {sources[:3]} (the bare DAG would not be the same)")
        lines.append(f"IN_{name} = {json.dumps({str(k): v for k, v in inputs.items()})}\n")
        lines.append(f"rule {name}:\n    input: lambda w: IN_{name}[w.j]\n")
        lines.append(f"    output: {[f'{name}/{{j}}/o{k}' for k in range(n_out)]}\n")
        if n_log:
            lines.append(f"    log: {[f'{name}/{{j}}/l{k}' for k in range(n_log)]}\n")
        if bench:
            lines.append(f"    benchmark: '{name}/{{j}}/bench.tsv'\n")
        lines.append(f"    script: {str(TOUCH)!r}\n")  # fourloops' rules are all script: rules
    return "\n".join(lines), [rename[t] for t in targets]


# ------------------------------------------------------------------------------------------ commands
def ours(workdir: Path, configfile: Path | None, targets: list[str], dry: bool = True) -> list[str]:
    cfg = [f"--configfile={configfile}"] if configfile else []
    return [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--profile", SMOKE, "--directory", str(workdir), *cfg,
            *(["-n"] if dry else []), *targets]


def plan(workdir: Path, configfile: Path | None, targets: list[str]) -> list[str]:
    cfg = ["--configfile", str(configfile)] if configfile else []
    return [FOURLOOPS, "plan", *targets, "-s", str(REPO / "Snakefile"), "--profile", SMOKE,
            "--directory", str(workdir), *cfg]


def bare(snakefile: Path, workdir: Path, targets: list[str], dry: bool = True) -> list[str]:
    return [SNAKEMAKE, "-s", str(snakefile), "--profile", SMOKE, "--workflow-profile", DESK,
            "--directory", str(workdir), *(["-n"] if dry else []), *targets]


def timed(cmd: list[str]) -> tuple[float, str, float]:
    """Wall seconds, output, and CPU seconds (user + system) of the command: on a machine shared with other
    work the wall time of a single-threaded dry-run grows with the load, its CPU time much less."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=ENV)
    secs = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return secs, proc.stdout + proc.stderr, cpu


def job_count(output: str) -> int:
    m = re.search(r"^total\s+(\d+)", output, re.M)
    return int(m.group(1)) if m else 0


def fresh(root: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=root))


# ------------------------------------------------------------------------------------------ phases
def phases_child(out: str, kind: str, argv: list[str]) -> int:
    """(child process) Run `snakemake` or `fourloops` in-process with timers around PHASES; write their sums."""
    spent = {phase: 0.0 for phase in PHASES}
    stack: list[list] = []  # [phase, seconds spent in timed calls inside it]

    def timer(phase, func):
        """Time `func` into `phase`, less what timed calls inside it take (each second counts once)."""
        @functools.wraps(func)
        def timed_call(*args, **kwargs):
            stack.append([phase, 0.0])
            t0 = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - t0
                _, inner = stack.pop()
                spent[phase] += elapsed - inner
                if stack:
                    stack[-1][1] += elapsed
        return timed_call

    for phase, names in PHASES.items():
        for module, attr in names:
            owner = importlib.import_module(module)
            *path, leaf = attr.split(".")
            for part in path:
                owner = getattr(owner, part)
            raw = owner.__dict__[leaf]
            wrapped = timer(phase, raw.__func__ if isinstance(raw, classmethod) else raw)
            setattr(owner, leaf, classmethod(wrapped) if isinstance(raw, classmethod) else wrapped)
    t0 = time.perf_counter()
    code = 0
    try:
        if kind == "snakemake":
            from snakemake.cli import main as snakemake_main

            snakemake_main(argv)
        else:
            from fourloops.cli import main as fourloops_main

            code = fourloops_main(argv)
    except SystemExit as exit_:
        code = exit_.code or 0
    Path(out).write_text(json.dumps({"total": time.perf_counter() - t0, "code": code, **spent}))
    return 0


def phases(kind: str, cmd: list[str], root: Path) -> dict:
    out = root / f"phases-{time.monotonic_ns()}.json"
    proc = subprocess.run([sys.executable, __file__, "--phases-child", str(out), kind, *cmd[1:]],
                          capture_output=True, text=True, cwd=REPO, env=ENV)
    if not out.exists() or json.loads(out.read_text())["code"]:
        raise SystemExit(f"bench: the phase run of {' '.join(cmd)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


# ------------------------------------------------------------------------------------------ warm directories
def warm_directories(size: str, configfile: Path | None, targets: list[str], bare_file: Path, bare_targets,
                     root: Path) -> tuple[Path, Path]:
    """fourloops' complete smoke run and bare's complete touch run for one size (built once, then reused)."""
    ours_dir, bare_dir = root / str(size) / "fourloops", root / str(size) / "bare"
    ours_dir.mkdir(parents=True, exist_ok=True)
    _, out, _ = timed(ours(ours_dir, configfile, targets))
    if "Nothing to be done" not in out:
        print(f"  building the warm directory of {size} jobs (a complete smoke run): {ours_dir}", flush=True)
        t0 = time.perf_counter()
        timed(ours(ours_dir, configfile, targets, dry=False))
        print(f"  ... {time.perf_counter() - t0:.0f} s", flush=True)
        _, out, _ = timed(ours(ours_dir, configfile, targets))
        if "Nothing to be done" not in out:
            raise SystemExit(f"bench: {ours_dir} is not up to date after a complete run:\n{out[-3000:]}")
    stamp = bare_dir / "Snakefile.built"
    if not stamp.exists() or stamp.read_text() != bare_file.read_text():
        shutil.rmtree(bare_dir, ignore_errors=True)
        bare_dir.mkdir(parents=True)
        timed(bare(bare_file, bare_dir, bare_targets, dry=False))
        stamp.write_text(bare_file.read_text())
    return ours_dir, bare_dir


# ------------------------------------------------------------------------------------------ main
def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--phases-child":
        return phases_child(sys.argv[2], sys.argv[3], sys.argv[4:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="22,100,500", help=f"points: sizes of the series {sorted(SERIES)}, or CxSxA")
    ap.add_argument("--warm", default="22,100,500", help="points also measured warm ('' for none)")
    ap.add_argument("--warm-dir", default=str(Path(tempfile.gettempdir()) / "fourloops-dryrun-warm"),
                    help="where the complete runs of the warm series are kept between bench runs")
    ap.add_argument("--no-plan", action="store_true", help="leave `fourloops plan` out")
    ap.add_argument("--prepare", action="store_true", help="only build the warm directories, measure nothing")
    args = ap.parse_args()
    sizes = [s for s in args.sizes.split(",") if s]
    warm = {s for s in args.warm.split(",") if s} & set(sizes)
    for point in sizes:
        shape_of(point)
    scratch = Path(tempfile.mkdtemp(prefix="fourloops-dryrun-"))
    try:
        return run(args, sizes, warm, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(args, sizes: list[str], warm: set[str], scratch: Path) -> int:
    print(f"machine: {platform.node()} {platform.machine()} cpus={os.cpu_count()} "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    if "PYTHONDONTWRITEBYTECODE" in os.environ:
        print("PYTHONDONTWRITEBYTECODE is set here: unset for the measured commands (a user's Python keeps "
              "compiled modules; the series' first, untimed runs compile them)", flush=True)
    points = {}
    for size in sizes:
        c, s, a = shape_of(size)
        config, targets = scale_config(c, s, a)
        cfg = None
        if config is not None:
            cfg = scratch / f"series-{size}.json"  # JSON is YAML: Snakemake reads either
            cfg.write_text(json.dumps(config))
        _, out, _ = timed(ours(fresh(scratch), cfg, targets))
        n = job_count(out)
        bare_text, bare_targets = bare_workflow(dag_of(out), targets)
        bare_file = scratch / f"bare-{size}.smk"
        bare_file.write_text(bare_text)
        _, bout, _ = timed(bare(bare_file, fresh(scratch), bare_targets))
        if job_count(bout) != n:
            raise SystemExit(f"bench: bare DAG has {job_count(bout)} jobs, fourloops' {n}")
        points[size] = {"config": cfg, "targets": targets, "bare": bare_file, "bare_targets": bare_targets,
                        "jobs": n, "shape": (c, s, a)}
        print(f"series point {size}: {c} conditions x {s} styles x {a} azimuths -> {n} jobs", flush=True)
        if size in warm:
            points[size]["warm"] = warm_directories(size, cfg, targets, bare_file, bare_targets,
                                                    Path(args.warm_dir))

    if args.prepare:
        return 0
    cases = [(size, state) for size in sizes for state in ("cold", "warm") if state == "cold" or size in warm]
    times = {case: {"ours": [], "bare": [], "plan": []} for case in cases}
    cpu = {case: {"ours": [], "bare": [], "plan": []} for case in cases}
    for _ in range(args.repeat):  # interleaved: every case once per repeat
        for size, state in cases:
            p = points[size]
            if state == "cold":
                dirs = fresh(scratch), fresh(scratch), fresh(scratch)
            else:
                dirs = p["warm"][0], p["warm"][1], p["warm"][0]
            runs = [("ours", ours(dirs[0], p["config"], p["targets"])),
                    ("bare", bare(p["bare"], dirs[1], p["bare_targets"]))]
            if not args.no_plan:
                runs.append(("plan", plan(dirs[2], p["config"], p["targets"])))
            for kind, cmd in runs:
                secs, _, cpu_secs = timed(cmd)
                times[(size, state)][kind].append(secs)
                cpu[(size, state)][kind].append(cpu_secs)

    phase_rows = []
    for size, state in cases:
        p = points[size]
        for kind, make in (("snakemake -n", ours), ("fourloops plan", plan)):
            if kind == "fourloops plan" and args.no_plan:
                continue
            d = fresh(scratch) if state == "cold" else p["warm"][0]
            cmd = make(d, p["config"], p["targets"])
            phase_rows.append((size, state, kind, phases("snakemake" if kind == "snakemake -n" else "fourloops",
                                                          cmd, scratch)))

    med = statistics.median
    print(f"\nmedians of {args.repeat} interleaved runs (s); ratio = fourloops / bare Snakemake on the same DAG")
    head = f"{'jobs':>5} {'state':5} {'c x s x az':>11} {'snakemake -n':>12} {'bare':>6} {'ratio':>6}"
    head += "" if args.no_plan else f" {'plan':>6} {'ratio':>6}"
    head += f" {'fourloops ms/job':>16} {'cpu: -n':>8} {'bare':>5} {'ratio':>6}"
    head += "" if args.no_plan else f" {'plan':>5} {'ratio':>6}"
    print(head)
    for size, state in cases:
        t, u = times[(size, state)], cpu[(size, state)]
        o, b = med(t["ours"]), med(t["bare"])
        c, s, a = points[size]["shape"]
        row = f"{points[size]['jobs']:5d} {state:5} {f'{c}x{s}x{a}':>11} {o:12.2f} {b:6.2f} {o / b:5.2f}x"
        if not args.no_plan:
            pl = med(t["plan"])
            row += f" {pl:6.2f} {pl / b:5.2f}x"
        row += f" {1000 * (o - b) / points[size]['jobs']:16.2f}"
        uo, ub = med(u["ours"]), med(u["bare"])
        row += f" {uo:8.2f} {ub:5.2f} {uo / ub:5.2f}x"
        if not args.no_plan:
            row += f" {med(u['plan']):5.2f} {med(u['plan']) / ub:5.2f}x"
        print(row)
    print("  fourloops ms/job: (snakemake -n - bare) / jobs, what fourloops adds per job of the DAG")
    print("  cpu: medians of the same runs' CPU seconds (user + system); the load of other work moves them least")
    print("\nfourloops' parse-time phases (ms; one in-process run each, timers around its functions)")
    print(f"{'jobs':>5} {'state':5} {'c x s x az':>11} {'command':14} " + " ".join(f"{p:>12}" for p in PHASES)
          + f" {'sum':>8} {'sum/job':>8} {'total':>8}")
    for size, state, kind, ph in phase_rows:
        total = sum(ph[p] for p in PHASES)
        shape = "x".join(str(x) for x in points[size]["shape"])
        print(f"{points[size]['jobs']:5d} {state:5} {shape:>11} {kind:14} "
              + " ".join(f"{1000 * ph[p]:12.1f}" for p in PHASES)
              + f" {1000 * total:8.1f} {1000 * total / points[size]['jobs']:8.2f} {1000 * ph['total']:8.1f}")
    print("  total: the whole in-process command; sum: fourloops' phases within it")
    for case, t in times.items():
        print(f"  raw {case}: " + "; ".join(f"{k} {[round(x, 2) for x in v]}" for k, v in t.items() if v)
              + "; cpu " + "; ".join(f"{k} {[round(x, 2) for x in v]}" for k, v in cpu[case].items() if v))
    print(f"load average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
