"""The `fourloops` command. A subcommand is one function taking (args) plus one line in SUBCOMMANDS
registering it with its argument setup."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------------------- plan
def _plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="*", help="file targets or rules (default: the workflow's default target)")
    p.add_argument("--machine",
                   help="machine of config/machines.yaml whose walls to check (default: config machine); cluster: "
                        "the SLURM partition per job")
    p.add_argument("--json", action="store_true", help="the plan as JSON for tools")
    p.add_argument("-s", "--snakefile", default=str(REPO / "Snakefile"))
    p.add_argument("--directory", "-d", help="working directory (default: here)")
    p.add_argument("--profile", help="your own global Snakemake profile; profiles/default still applies over it, key "
                                      "by key, as with snakemake")
    p.add_argument("--workflow-profile", help="a profile of profiles/ (pod, smoke, sizing, slurm, sizing-gpu) in "
                                               "place of profiles/default, as snakemake: --workflow-profile "
                                               "profiles/pod")
    p.add_argument("--config", nargs="*", default=[], help="key=value config overrides, as snakemake --config")
    p.add_argument("--configfile", nargs="*", default=[])
    p.add_argument("--forcerun", nargs="*", default=[], metavar="RULE",
                   help="plan these rules' jobs (and what depends on them) again, as snakemake --forcerun; end the "
                        "list with -- before the targets")


def _workflow_profile(given: str | None, snakefile: Path) -> Path | None:
    """The workflow profile Snakemake 9.27.1 uses (its cli.args_to_api): none for `none`; a file named; else the first
    of the name, profiles/<name> and profiles/<name> beside the Snakefile that exists (the name `default` when none
    is given); None where none does (Snakemake then runs without one, silently)."""
    if given == "none":
        return None
    name = Path(given or "default")
    if given and name.is_file():
        return name
    return next((c for c in (name, Path("profiles") / name, snakefile.parent / "profiles" / name) if c.exists()), None)


def plan(args) -> int:
    from fourloops import plan as planmod
    from snakemake.cli import get_profile_dir

    from fourloops.config import configfile_problems, profile_problems

    # what Snakemake would refuse before reading the workflow, in words that name the file, line or value
    problems = configfile_problems(args.configfile)
    found = _workflow_profile(args.workflow_profile, Path(args.snakefile))
    if args.workflow_profile not in (None, "none") and (found is None or get_profile_dir(str(found)) is None):
        shipped = sorted(p.name for p in (REPO / "profiles").iterdir() if (p / "config.yaml").is_file())
        why = ("no profile there (Snakemake would plan without one, silently)" if found is None else
               f"{found} holds no config.yaml or profile.yaml (Snakemake stops, naming neither this command nor the "
               "profiles it ships)")
        problems.append(f"--workflow-profile {args.workflow_profile!r}: {why}; allowed: one of "
                        f"profiles/{{{','.join(shipped)}}}, or a folder holding a config.yaml")
    for folder in ([found] if found else []) + ([Path(args.profile)] if args.profile else []):
        problems += profile_problems(folder)
    for entry in args.config:  # Snakemake's parse_config refuses these with a traceback
        key, eq, _ = entry.partition("=")
        if not eq or not re.fullmatch(r"[a-zA-Z_][\w-]*\w", key):
            target = "" if eq else " (a target? --config takes every word after it: end it with -- before the targets)"
            problems.append(f"--config {entry!r}: not KEY=VALUE with KEY a top-level config key{target}; allowed: "
                            "e.g. seed=3; a nested key (render.image_size) goes in a --configfile")
    if args.machine is not None:
        from fourloops import machines

        try:
            table = machines.load()
        except machines.MachinesError as err:  # its own words: file, line, key, value
            table = None
            problems.append(str(err))
        if table is not None and args.machine not in machines.targets(table):
            problems.append(f"--machine {args.machine!r}: not a machine of config/machines.yaml; allowed: one of "
                            f"{machines.targets(table)}")
    if problems:
        print("fourloops plan: nothing was planned:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    argv = ["-s", args.snakefile]
    if args.directory:
        argv += ["--directory", args.directory]
    if args.profile:
        argv += ["--profile", args.profile]
    if args.workflow_profile:
        argv += ["--workflow-profile", args.workflow_profile]
    if args.configfile:
        argv += ["--configfile", *args.configfile]
    # --machine is not passed as --config: a command-line --config replaces a profile's config list
    if args.config:
        argv += ["--config", *args.config]
    if args.forcerun:
        argv += ["--forcerun", *args.forcerun]
    result = planmod.run(argv + ["--", *args.targets] if args.targets else argv, args.machine)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(planmod.format_plan(result))
    if not result["ok"] or result.get("config_problems"):
        return 2  # a job is refused: by the walls, or by its config (weights a run would not load)
    return 3 if result.get("locked") else 0  # a run would not start until `snakemake --unlock`


# ---------------------------------------------------------------------------------------- guard
def _guard_args(p: argparse.ArgumentParser) -> None:
    from fourloops import guard as guardmod

    guardmod.add_arguments(p)


def guard(args) -> int:
    from fourloops import guard as guardmod

    return guardmod.run(args.limit_gib, args.device)


# ----------------------------------------------------------------------------------------- probe
def _probe_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", default=".", help="working directory holding results/probe/")


def probes(args) -> int:
    """List the probe records the wall check will use (results/probe/<machine>/*.json), one line per configuration,
    then the peaks measured by earlier jobs' provenance."""
    from fourloops.asks import Measurements
    from fourloops.stage import measured_key
    from fourloops.tables import format_table

    m = Measurements.load(args.workdir, measured_key)
    if not m.probes and not m.history:
        print("no probes or measured provenance yet: run `snakemake probe` on the machine")
    rows = []
    for key, recs in sorted(m.probes.items()):
        for r in recs:
            configs = r.get("configurations") or [{"peak_vram_gib": r["peak_vram_gib"],
                                                   "seconds_per_item": r.get("pass_seconds")}]
            for c in configs:
                refs = c.get("references", c.get("images", "-"))
                rows.append((r.get("machine_name", "?"), r.get("component", "?"), key, r.get("precision", "-"),
                             r.get("resolution", c.get("resolution", "-")), refs,
                             _num(c.get("peak_vram_gib")), _num(r.get("load_seconds"), 1),
                             _num(c.get("seconds_per_item"), 3), r.get("gpu_name") or "no GPU",
                             (r.get("started") or "?")[:10], r.get("model_set", "?")))
    if rows:
        print(format_table(("machine", "component", "key", "precision", "res", "refs", "peak GiB", "load s", "s/item",
                            "GPU", "date", "model set"), rows))
    for key, fig in sorted(m.history.items()):
        print(f"{key:48s} {fig.value:.2f} GiB  {fig.source}")
    return 0


def _num(v, nd: int = 2) -> str:
    return "-" if v is None else f"{float(v):.{nd}f}"


def _pods_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("rest", nargs=argparse.REMAINDER, help="reap [--prefix P] [--dry-run] [--api-url URL]")


def pods(args) -> int:
    """Rented pods: `fourloops pods reap` terminates fourloops pods no live run owns (verified teardown)."""
    from fourloops.pods import main as pods_main

    return pods_main(args.rest)


# -------------------------------------------------------------------------------------- compare
def _compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("trees", nargs="*", metavar="TREE",
                   help="A and B: each a working directory (its results/), a results/ directory, or a listing file")
    p.add_argument("--list", metavar="DIR", help="print DIR's listing (every file under results/ with its sha256 and "
                                                 "size) as JSON, to compare against elsewhere")
    p.add_argument("--json", action="store_true", help="the rows as JSON for tools")
    p.add_argument("--markdown", metavar="FILE", help="also write the table as a Markdown page")
    p.add_argument("--across-machines", action="store_true",
                   help="two machine kinds: leave config/compare.yaml's machine_fields out as well")
    p.add_argument("--ignore", action="append", default=[], metavar="FIELD",
                   help="leave this JSON field or CSV column out as well, for this comparison (repeatable; e.g. "
                        "`--ignore code` for two commits' runs: their results, not their code)")


def compare(args) -> int:
    """Two results trees artifact by artifact: 0 when nothing is different or missing, 1 otherwise, 2 on bad input."""
    from fourloops import compare as cmp
    from fourloops.io import write_text
    from fourloops.tables import format_table
    from fourloops.yamlcheck import YamlError

    if args.list is not None:
        if args.trees:
            print(f"fourloops compare: --list takes one tree and no others (given also {args.trees}); allowed: "
                  "`fourloops compare --list DIR > listing.json`", file=sys.stderr)
            return 2
        try:
            print(json.dumps(cmp.listing(args.list), indent=1, sort_keys=True))
        except cmp.CompareError as err:
            print(f"fourloops compare: {err}", file=sys.stderr)
            return 2
        return 0
    if len(args.trees) != 2:
        print(f"fourloops compare: {len(args.trees)} trees given ({args.trees}); allowed: two, A and B, each "
              f"{cmp.ALLOWED}", file=sys.stderr)
        return 2
    try:
        a, b = (cmp.open_tree(t) for t in args.trees)
        rows = cmp.compare_trees(a, b, cmp.load_tolerances(), across_machines=args.across_machines,
                                 ignore=args.ignore)
    except (cmp.CompareError, YamlError) as err:
        print(f"fourloops compare: {err}", file=sys.stderr)
        return 2
    if args.markdown:
        write_text(args.markdown, cmp.markdown(rows, *args.trees))
    if args.json:
        print(json.dumps({"a": args.trees[0], "b": args.trees[1], "counts": cmp.counts(rows),
                          "rows": [r.as_dict() for r in rows]}, indent=1))
    else:
        print(f"A: {args.trees[0]}\nB: {args.trees[1]}")
        print(format_table(cmp.COLUMNS, [[getattr(r, c) for c in cmp.COLUMNS] for r in rows], rule=True))
        print(", ".join(f"{n} {v}" for v, n in cmp.counts(rows).items()))
    return cmp.exit_status(rows)


# name -> (function, argument setup, help). Adding a subcommand: one function + one line here.
SUBCOMMANDS = {
    "plan": (plan, _plan_args, "what a run would execute, why, walls, time and cost"),
    "guard": (guard, _guard_args, "refuse when the GPU is already busy (as python -m fourloops.guard)"),
    "probes": (probes, _probe_args, "the measured peaks the wall check will use"),
    "pods": (pods, _pods_args, "rented pods: `pods reap` terminates orphans no live run owns"),
    "compare": (compare, _compare_args, "two results trees artifact by artifact: equal, close, different, missing"),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fourloops")
    sub = ap.add_subparsers(dest="command", required=True)
    for name, (func, setup, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_)
        setup(p)
        p.set_defaults(func=func)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
