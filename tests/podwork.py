"""What a stand-in pod does with its time (tests/runpod_standin.py): run on the pod by the executor as its setup,
fetch and job-python commands, it plays config/pod_life.yaml's setup and weights download at the stand-in's
time scale, and records every piece of work as an event the stand-in reads back.

    podwork.py setup                 the environment install (pod_life setup_s)
    podwork.py fetch ID [ID ...]     the weights of these hub ids (models.yaml sizes at pod_life hf_mb_s)
    podwork.py job -- CMD ...        a job: runs CMD (the executor has waited for the weights' lock)

Each piece of work starts at this process's own start (its interpreter and imports are the stand-in's, not the pod's
life: a setup lasts setup_s from its first instant). The pod's rsync is a shell shim the stand-in writes
(tests/runpod_standin.py), not this script: a Python start on each rsync would be stand-in seconds a real pod
does not have.
"""

from __future__ import annotations

import os
import time


def _process_start() -> float:
    """This process's start as a time.time() instant, before its imports: its age (/proc/uptime less its start in
    clock ticks after boot, one clock, 10 ms steps) taken from now. (/proc/stat's btime is whole seconds: an offset
    of up to 1 s, which a scaled clock stretches to many.)"""
    try:
        ticks = int(open(f"/proc/{os.getpid()}/stat").read().rsplit(")", 1)[1].split()[19])
        uptime = float(open("/proc/uptime").read().split()[0])
        return time.time() - max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.time()


STARTED = _process_start()

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from fourloops import podbill  # noqa: E402
from fourloops.asks import load_facts  # noqa: E402

SCALE = float(os.environ.get("FOURLOOPS_STANDIN_SCALE", "1"))
EVENTS = Path(os.environ.get("FOURLOOPS_STANDIN_EVENTS", "events.jsonl"))


def record(cause: str, t0: float, t1: float, **extra) -> None:
    with open(EVENTS, "a") as f:
        f.write(json.dumps({"cause": cause, "t0": t0, "t1": t1, **extra}) + "\n")


def main(argv: list[str]) -> int:
    life = podbill.load_life(REPO / "config" / "pod_life.yaml")
    what = argv[0]
    if what == "setup":
        t0 = STARTED
        time.sleep(max(0.0, life.setup_s * SCALE - (time.time() - t0)))
        record("setup", t0, time.time())
        return 0
    if what == "fetch":
        facts = load_facts(REPO / "config" / "models.yaml")
        by_id = {m.get("id"): k for k, m in facts["models"].items()}
        t0 = STARTED
        for hub_id in argv[1:]:
            gb = podbill.weights_gb(facts, by_id[hub_id]) if hub_id in by_id else 0.0
            time.sleep(max(0.0, life.download_s(gb) * SCALE - (time.time() - t0)))
            record("download", t0, time.time(), model=hub_id, gb=gb)
            t0 = time.time()
        return 0
    if what == "job":
        cmd = argv[argv.index("--") + 1:]
        t0 = STARTED  # this wrapper's own start is the job's (GPU-busy), not idle the pod bills
        rc = subprocess.call(cmd)
        record("job", t0, time.time(), rc=rc)
        return rc
    print(f"podwork: unknown work {what!r}; allowed: setup, fetch, job", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
