"""The plan's bill forecast against an independent clock: the RunPod stand-in, driven by the real executor.

    .venv/bin/python bench/standin_bill.py [--scales 0.02 0.05 0.1] [--out DIR]

Runs tests/test_pod_bill.py's stand-in run (generate A of the smoke set on one stand-in pod: real ssh, rsync,
polling and fetch locks; config/pod_life.yaml's pull, null runtime, stale ssh, setup and download played by
tests/runpod_standin.py and tests/podwork.py) once per time scale, in that order, and sets the stand-in's bill,
read on its own clock and attributed by cause, beside the forecast (fourloops.podbill.forecast) for the same run.

The stand-in plays the pod's life scaled in time, but the executor's own seconds (each ssh and rsync call, the
REST poll, the half poll interval before it sees the pod ready, Snakemake's status check before the terminate)
are real: on the stand-in's clock they last 1/scale times longer. So the forecast set beside the stand-in is
podbill.forecast with those figures (pod_life's ssh_call_s, rsync_call_s, rest_call_s and the executor's poll_s)
divided by the scale, and a teardown of the executor's alone (STATUS_CHECK_S and the terminate call, / scale: the
stand-in has no RunPod side after the terminate, which pod_life's teardown_s includes); the pod's life figures are
unchanged. The executor's own log gives the
calls it made, counted and timed (`executor calls from ready to terminate`), printed beside the forecast's count.
Job seconds are not compared: the stand-in runs the smoke model on this CPU (its real seconds / scale), not the
GPU seconds the plan forecasts. The raw pytest output per scale is kept under --out.
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
# The test's fetch command downloads this real model for the smoke job, which the plan (smoke model set: local tiny
# models, nothing to download) does not know of; its download is forecast here from the same figures.
FETCHED = "OmniGen2/OmniGen2"
POLL_S = 0.5  # the test's --runpod-poll-s (tests/test_pod_executor.py _cmd)
STRETCHED = ("ssh_call_s", "rsync_call_s", "rest_call_s")  # the executor's real seconds per call
# The stand-in stops billing at the terminate (no RunPod side), so its teardown is the executor's alone: Snakemake's
# status check every 1 s (the executor's next_seconds_between_status_checks) sees the job end half an interval
# late on average, the shutdown joins the status thread half an interval later, then the terminate call.
STATUS_CHECK_S = 1.0

sys.path.insert(0, str(REPO / "src"))
from fourloops import podbill  # noqa: E402

CAUSES = podbill.CAUSES


def standin_forecast(scale: float, gpu_s: float, transfer_s: float) -> dict:
    """podbill.forecast for the run's one pod job as the stand-in's clock sees it: the pod's life as pod_life.yaml
    says, the executor's real seconds (STRETCHED, the poll) / scale; the job waits for FETCHED (config/models.yaml's
    size at hf_mb_s), downloaded from the container as the test's --runpod-fetch-at container."""
    import dataclasses

    from fourloops.asks import load_facts

    facts = load_facts(REPO / "config" / "models.yaml")
    [key] = [k for k, m in facts["models"].items() if m.get("id") == FETCHED]
    life = podbill.load_life()
    life = dataclasses.replace(life, **{f: getattr(life, f) / scale for f in STRETCHED},
                               teardown_s=(STATUS_CHECK_S + life.rest_call_s) / scale)
    # the logged transfer (repo, inputs, outputs) all counted as the repo's: an upper bound on its sync
    return podbill.forecast([podbill.PodJob(name="generate", seconds=gpu_s, model=key)], life,
                            {key: podbill.weights_gb(facts, key)}, repo_mb=transfer_s * life.rsync_mb_s,
                            hourly_usd=0.0, fetch_at="container", poll_s=POLL_S / scale)


def _causes(line: str) -> dict[str, float]:
    return {c: float(v) for c, v in re.findall(r"(\w+) (-?[\d.]+)", line.split(":", 1)[1]) if c in CAUSES}


def _calls(text: str) -> dict[str, tuple[int, float]]:
    """The executor's calls from ready to terminate, per kind: (count, median seconds)."""
    line = re.search(r"executor calls from ready to terminate: (.*?); before ready", text).group(1)
    return {k: (int(n), float(med)) for k, n, med in re.findall(r"(\w+) (\d+) \(median ([\d.]+) s", line)}


def run(scale: float, out: Path) -> dict:
    env = dict(os.environ, FOURLOOPS_BENCH_STANDIN_SCALE=repr(scale), PYTHONPATH=str(REPO / "src"))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-s", "-p", "no:cacheprovider", TEST],
                          cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    text = proc.stdout + proc.stderr
    (out / f"scale-{scale:g}.txt").write_text(f"$ FOURLOOPS_BENCH_STANDIN_SCALE={scale!r} {sys.executable} -m pytest "
                                              f"-x -q -s {TEST}\n# rc {proc.returncode}, {wall:.0f} s wall\n" + text)
    if proc.returncode and "stand-in idle by cause" not in text:
        raise SystemExit(f"scale {scale}: the stand-in run failed (rc {proc.returncode}); see {out}/scale-{scale:g}.txt")
    if proc.returncode:
        print(f"# scale {scale}: the test failed after the run (rc {proc.returncode}); see {out}/scale-{scale:g}.txt")
    m = re.search(r"stand-in at 1/\d+: billed (\d+) s, job (\d+) s, idle (\d+) s", text)
    played = _causes(re.search(r"stand-in idle by cause:.*", text).group(0))
    logged = _causes(re.search(r"forecast idle by cause:.*", text).group(0))
    fb = re.search(r"forecast \(fourloops plan --machine pod\): ([\d.]+) s billed, ([\d.]+) s GPU-busy", text)
    bill = standin_forecast(scale, float(fb.group(2)), logged.get("transfer", 0.0))
    return {"scale": scale, "wall_s": wall, "billed": float(m.group(1)), "job": float(m.group(2)),
            "idle": float(m.group(3)), "played": played, "forecast": bill["idle_s"], "logged": logged,
            "calls": _calls(text), "forecast_calls": bill["calls"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", nargs="+", type=float, default=[0.02, 0.05, 0.1])
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
        made = ", ".join(f"{k} {n} (median {med:.3f} s)" for k, (n, med) in r["calls"].items())
        print(f"{r['scale']:>6g}  executor calls from ready to terminate: {made}; the forecast counts "
              + ", ".join(f"{k} {n}" for k, n in r["forecast_calls"].items()))
        idle_f = sum(r["forecast"].values())
        print(f"{r['scale']:>6g}  stand-in billed {r['billed']:.0f} s (job {r['job']:.0f} s, idle {r['idle']:.0f} s); "
              f"forecast idle {idle_f:.0f} s ({(idle_f - r['idle']) / r['idle'] * 100:+.1f}% against the stand-in's idle); "
              f"forecast idle + the stand-in's job seconds = {idle_f + r['job']:.0f} s "
              f"({(idle_f + r['job'] - r['billed']) / r['billed'] * 100:+.1f}% of its bill); {r['wall_s']:.0f} s wall")


if __name__ == "__main__":
    main()
