"""Speed of the walls: refusal time on the full default DAG, and `fourloops plan` vs a bare `snakemake -n`.

    .venv/bin/python bench/walls.py [--repeat 3]

Refusal: the default (desk) profile, real model set, generator at fp32 (29.8 GiB asked on a 24 GiB
card), a real run (not -n) from an empty working directory: seconds from the command to its non-zero
exit, nothing started. Plan: `fourloops plan results/ladder.csv` against `snakemake -n results/ladder.csv`,
same profile (smoke), same empty working directory. Medians; compare ratios, not seconds.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FP32 = """generator:
  backend: omnigen2
  model: OmniGen2/OmniGen2
  revision: main
  precision: fp32
  device: cuda
  steps: 28
  guidance: 4.0
  size: 512
  negative_prompt: ""
"""


def timed(cmd: list[str], cwd: str) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - t0, proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    refuse, plan, bare = [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "fp32.yaml").write_text(FP32)
            cmd = [str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), "--directory", tmp, "-c1",
                   "results/ladder.csv", "--configfile", "fp32.yaml"]
            secs, proc = timed(cmd, tmp)
            assert proc.returncode != 0 and "walls:" in proc.stderr + proc.stdout, proc.stderr[-2000:]
            assert not Path(tmp, "results").exists()
            refuse.append(secs)
        smoke = ["--profile", str(REPO / "profiles" / "smoke"), "--directory"]
        with tempfile.TemporaryDirectory() as tmp:
            secs, proc = timed([str(BIN / "fourloops"), "plan", *smoke, tmp, "results/ladder.csv"], tmp)
            assert proc.returncode == 0, proc.stderr[-2000:]
            plan.append(secs)
        with tempfile.TemporaryDirectory() as tmp:
            secs, proc = timed([str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), *smoke, tmp, "-n",
                                "results/ladder.csv"], tmp)
            assert proc.returncode == 0, proc.stderr[-2000:]
            bare.append(secs)
    r, p, b = statistics.median(refuse), statistics.median(plan), statistics.median(bare)
    print(f"machine: {platform.node()} {platform.machine()} cpus={os.cpu_count()}")
    print(f"refusal, real run, default profile, fp32 generator: median {r:.2f} s {[round(x, 2) for x in refuse]}")
    print(f"fourloops plan results/ladder.csv (smoke):         median {p:.2f} s {[round(x, 2) for x in plan]}")
    print(f"snakemake -n results/ladder.csv (smoke):           median {b:.2f} s {[round(x, 2) for x in bare]}")
    print(f"plan / snakemake -n: {p / b:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
