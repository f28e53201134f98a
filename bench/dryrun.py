"""Dry-run time of the workflow against bare Snakemake on a trivial DAG with the same job count.

    .venv/bin/python bench/dryrun.py [--repeat 3]

Both run `snakemake -n` in a fresh, empty working directory with the same scheduler, so the
difference is what fourloops adds at parse time (config validation, input functions, asks).
Medians of --repeat runs; compare the ratio, not the seconds (time on a shared machine is noisy).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

TRIVIAL = """
N = {n}
rule all:
    input: expand("out/{{i}}.txt", i=range(N - 1))
rule make:
    output: "out/{{i}}.txt"
    log: "logs/{{i}}.log"
    resources: profile="desk", vram_mb=0
    shell: "touch {{output}}"
"""


def timed(cmd: list[str], cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return secs, proc.stdout


def job_count(stdout: str) -> int:
    m = re.search(r"^total\s+(\d+)", stdout, re.M)
    return int(m.group(1)) if m else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ours, bare = [], []
    n_jobs = 0
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--profile", str(REPO / "profiles" / "smoke"),
                   "--directory", tmp, "-n", "results/ladder.csv"]
            secs, out = timed(cmd, Path(tmp))
            ours.append(secs)
            n_jobs = job_count(out)
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "Snakefile").write_text(TRIVIAL.format(n=n_jobs))
            secs, out = timed([SNAKEMAKE, "--scheduler", "greedy", "-c2", "-n"], Path(tmp))
            assert job_count(out) == n_jobs, (job_count(out), n_jobs)
            bare.append(secs)
    o, b = statistics.median(ours), statistics.median(bare)
    print(f"machine: {platform.node()} {platform.machine()} cpus={os.cpu_count()}")
    print(f"jobs in the DAG: {n_jobs}")
    print(f"fourloops `snakemake -n results/ladder.csv` (smoke profile): median {o:.2f} s  {[round(x, 2) for x in ours]}")
    print(f"bare Snakemake, trivial DAG of {n_jobs} jobs:               median {b:.2f} s  {[round(x, 2) for x in bare]}")
    print(f"ratio: {o / b:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
