"""The plan's bill forecast against an independent clock: the RunPod stand-in, driven by the real executor.

    .venv/bin/python bench/standin_bill.py [--scales 0.02 0.1] [--out DIR]

Runs tests/test_pod_bill.py's stand-in run (generate A of the smoke set on one stand-in pod: real ssh, rsync,
polling and fetch locks; config/pod_life.yaml's pull, null runtime, stale ssh, setup and download played by
tests/runpod_standin.py and tests/podwork.py) once per time scale, in that order, and sets the stand-in's bill,
read on its own clock and attributed by cause, beside the forecast (fourloops.podbill.forecast) the executor
logged for the same run.

What the forecast does not contain: the executor's own real seconds (each ssh or rsync handshake, the ready
poll's sleep, Snakemake's status check and the 2 s heartbeat that starts the teardown). On the stand-in's clock
they last 1/scale times longer, so if they are the gap, idle gap x scale stays about constant across scales
(the real seconds they took) while the gap itself shrinks with 1/scale. Job seconds are not compared: the stand-in
runs the smoke model on this CPU (its real seconds / scale), not the GPU seconds the plan forecasts.
The raw pytest output per scale is kept under --out.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/test_pod_bill.py::test_a_pod_run_on_the_standin_attributes_its_idle_and_keeps_it_under_twice_the_floor"
CAUSES = ("pull", "ready", "setup", "download", "transfer", "waiting", "teardown")
# The test's fetch command downloads this real model for the smoke job, which the plan (smoke model set: local tiny
# models, nothing to download) does not know of; its download is forecast here from the same figures.
FETCHED = "OmniGen2/OmniGen2"


def download_forecast(gpu_s: float, transfer_s: float) -> float:
    """podbill.forecast's `download` for the run's one pod job when it waits for FETCHED (config/models.yaml's
    size at pod_life.yaml's hf_mb_s), started from the container as the test's --runpod-fetch-at container."""
    sys.path.insert(0, str(REPO / "src"))
    from fourloops import podbill
    from fourloops.asks import load_facts

    facts = load_facts(REPO / "config" / "models.yaml")
    [key] = [k for k, m in facts["models"].items() if m.get("id") == FETCHED]
    life = podbill.load_life()
    # the logged transfer (repo, inputs, outputs) all counted as the repo's: an upper bound on its sync
    bill = podbill.forecast([podbill.PodJob(name="generate", seconds=gpu_s, model=key)], life,
                            {key: podbill.weights_gb(facts, key)}, repo_mb=transfer_s * life.rsync_mb_s,
                            hourly_usd=0.0, fetch_at="container")
    return bill["idle_s"]["download"]


def _causes(line: str) -> dict[str, float]:
    return {c: float(v) for c, v in re.findall(r"(\w+) (-?[\d.]+)", line.split(":", 1)[1]) if c in CAUSES}


def run(scale: float, out: Path) -> dict:
    env = dict(os.environ, FOURLOOPS_BENCH_STANDIN_SCALE=repr(scale), PYTHONPATH=str(REPO / "src"))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-s", "-p", "no:cacheprovider", TEST],
                          cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    text = proc.stdout + proc.stderr
    (out / f"scale-{scale:g}.txt").write_text(f"$ FOURLOOPS_BENCH_STANDIN_SCALE={scale!r} {sys.executable} -m pytest "
                                              f"-x -q -s {TEST}\n# rc {proc.returncode}, {wall:.0f} s wall\n" + text)
    if proc.returncode:
        raise SystemExit(f"scale {scale}: the stand-in run failed (rc {proc.returncode}); see {out}/scale-{scale:g}.txt")
    m = re.search(r"stand-in at 1/\d+: billed (\d+) s, job (\d+) s, idle (\d+) s", text)
    played = _causes(re.search(r"stand-in idle by cause:.*", text).group(0))
    forecast = _causes(re.search(r"forecast idle by cause:.*", text).group(0))
    fb = re.search(r"forecast \(fourloops plan --machine pod\): ([\d.]+) s billed, ([\d.]+) s GPU-busy", text)
    if forecast.get("download", 0.0) == 0.0:  # the plan did not know of the test's download
        forecast["download"] = download_forecast(float(fb.group(2)), forecast.get("transfer", 0.0))
    return {"scale": scale, "wall_s": wall, "billed": float(m.group(1)), "job": float(m.group(2)),
            "idle": float(m.group(3)), "played": played, "forecast": forecast,
            "forecast_billed": float(fb.group(1)), "forecast_gpu": float(fb.group(2))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", nargs="+", type=float, default=[0.02, 0.1])
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / f"standin-bill-{time.strftime('%Y-%m-%d')}")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"# {platform.node()}, {os.cpu_count()} CPUs, python {platform.python_version()}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    rows = [run(s, args.out) for s in args.scales]
    print(f"{'scale':>6} {'cause':>9} {'stand-in s':>10} {'forecast s':>10} {'gap s':>8} {'gap x scale (real s)':>20}")
    for r in rows:
        for c in (*CAUSES, "idle"):
            got = r["idle"] if c == "idle" else r["played"].get(c, 0.0)
            want = sum(r["forecast"].values()) if c == "idle" else r["forecast"].get(c, 0.0)
            print(f"{r['scale']:>6g} {c:>9} {got:>10.1f} {want:>10.1f} {got - want:>8.1f} {(got - want) * r['scale']:>20.2f}")
        idle_f = sum(r["forecast"].values())
        print(f"{r['scale']:>6g}  stand-in billed {r['billed']:.0f} s (job {r['job']:.0f} s, idle {r['idle']:.0f} s); "
              f"forecast idle {idle_f:.0f} s ({(r['idle'] - idle_f) / r['idle'] * 100:+.1f}% of the stand-in's idle); "
              f"forecast idle + the stand-in's job seconds = {idle_f + r['job']:.0f} s "
              f"({(idle_f + r['job'] - r['billed']) / r['billed'] * 100:+.1f}% of its bill); {r['wall_s']:.0f} s wall")


if __name__ == "__main__":
    main()
