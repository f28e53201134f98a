"""Anny's first build: the seconds and the cache size a fresh machine pays once (README, "Measured").

    .venv/bin/python bench/anny_build.py > bench/results/anny-build-DATE.txt

Builds the default body (fourloops.body.build_body, the renders' own call) in a fresh process with an empty
$ANNY_CACHE_DIR (a temporary directory, removed afterwards), `--repeat` times, and prints each build's seconds and the
cache's size with the machine's load before and after.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import time
t0 = time.perf_counter()
from fourloops.body import DEFAULT_PHENOTYPE, DEFAULT_POSE, build_body
build_body(DEFAULT_PHENOTYPE, DEFAULT_POSE)
print(time.perf_counter() - t0)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    print(f"machine: {platform.node()} {platform.machine()} cpus={os.cpu_count()}; "
          f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    for i in range(args.repeat):
        cache = Path(tempfile.mkdtemp(prefix="fourloops-anny-"))
        try:
            load = os.getloadavg()
            env = {**os.environ, "ANNY_CACHE_DIR": str(cache), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if proc.returncode:
                print(proc.stderr[-4000:], file=sys.stderr)
                return proc.returncode
            size = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())
            print(f"build {i + 1}: {wall:.1f} s for the process ({float(proc.stdout.split()[-1]):.1f} s in build_body "
                  f"with its imports), cache {size / 1e6:.0f} MB; load average before "
                  f"{' '.join(f'{x:.2f}' for x in load)}, after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
