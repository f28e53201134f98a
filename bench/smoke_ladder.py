"""Smoke ladder wall time from empty results with warm caches, and how it splits across rules.

    .venv/bin/python bench/smoke_ladder.py [--keep DIR] > bench/results/smoke-ladder-DATE.txt

Runs `snakemake --workflow-profile profiles/smoke results/ladder.csv` in a fresh working directory (Anny's
cache and Python's bytecode are warm after a machine's first ladder), then reads every rule's
Snakemake benchmark file. Goal (issue 2): at most 180 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="working directory to use and keep (default: a temporary one)")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="fourloops-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return run(work)
    finally:
        if args.keep is None:  # the smoke models and outputs (~130 MB)
            shutil.rmtree(work, ignore_errors=True)


def run(work: Path) -> int:
    cmd = [str(Path(sys.executable).with_name("snakemake")), "-s", str(REPO / "Snakefile"),
           "--workflow-profile", str(REPO / "profiles" / "smoke"), "--directory", str(work), "results/ladder.csv"]
    load = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        print(proc.stderr[-4000:], file=sys.stderr)
        return proc.returncode
    per_rule = defaultdict(list)
    for tsv in sorted((work / "benchmarks").rglob("*.tsv")):
        with open(tsv) as fh:
            row = next(csv.DictReader(fh, delimiter="\t"))
        per_rule[tsv.parent.name].append(float(row["s"]))
    print(f"machine: {platform.node()} {platform.machine()} cpus={os.cpu_count()}; load average before "
          f"{' '.join(f'{x:.2f}' for x in load)}, after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"command: {' '.join(cmd)}")
    print(f"smoke ladder wall time: {wall:.1f} s (goal <= 180 s)")
    print(f"{'rule':<18}{'jobs':>5}{'sum s':>9}{'max s':>8}")
    for rule, secs in sorted(per_rule.items(), key=lambda kv: -sum(kv[1])):
        print(f"{rule:<18}{len(secs):>5}{sum(secs):>9.1f}{max(secs):>8.1f}")
    print(f"{'all jobs':<18}{sum(len(s) for s in per_rule.values()):>5}{sum(sum(s) for s in per_rule.values()):>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
