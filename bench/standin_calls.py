"""The executor's own seconds per call, timed on the RunPod stand-in's loopback sshd (not over the internet).

    .venv/bin/python bench/standin_calls.py [--n 30]

One stand-in pod (real time, no pod-life delays), the executor's own Transport and runpod.Client: N times each,
interleaved, `ssh ... true` (connect, log in, run, exit), an rsync of one 0.5 MB file up (pod_life's file_mb; the
pod's rsync is the stand-in's shell shim) and GET /v2/pods/{id}. Prints count, median, min and max per kind:
the medians are config/pod_life.yaml's ssh_call_s, rsync_call_s and rest_call_s.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests")]

from fourloops import podbill, runpod  # noqa: E402
from runpod_standin import Sshd, StandIn, pod_let_in  # noqa: E402

KEY = "rpa_" + "0" * 40


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="standin-calls-"))
    sshd = Sshd(tmp / "sshd")
    life = dataclasses.replace(podbill.load_life(), pull_mb_s=1e9, runtime_null_s=0.0, ssh_stale_s=0.0)
    standin = StandIn(sshd, tmp / "pods", KEY, life=life, time_scale=1.0)
    try:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / "id")], check=True)
        p, pod, transport = pod_let_in(standin, KEY, "fourloops-calls-1", tmp / "id", tmp / "known_hosts")
        client = runpod.Client(KEY, standin.url)
        src = tmp / "up"
        src.mkdir()
        pod.calls.clear()
        for i in range(args.n):
            assert transport.ssh(pod, "true", timeout=30).returncode == 0
            (src / f"f{i}.bin").write_bytes(os.urandom(int(life.file_mb * 1e6)))
            up = transport.rsync(pod, [f"f{i}.bin"], str(src) + "/", f"{pod.user}@{pod.host}:{p['workspace']}/")
            assert up.returncode == 0, up.stderr
            t0 = time.monotonic()
            client.get_pod(p["id"])
            pod.called("rest", t0)
        print(f"# {platform.node()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, python "
              f"{platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; n = {args.n}")
        for kind in ("ssh", "rsync", "rest"):
            took = [t1 - t0 for k, t0, t1 in pod.calls if k == kind]
            print(f"{kind:>6} {len(took):>3} calls: median {statistics.median(took):.3f} s, min {min(took):.3f} s, "
                  f"max {max(took):.3f} s")
    finally:
        standin.close()
        sshd.stop()


if __name__ == "__main__":
    main()
