"""What a stand-in pod does with its time (tests/runpod_standin.py): run on the pod by the executor as its setup,
fetch and job-python commands, it plays config/pod_life.yaml's setup and weights download at the stand-in's
time scale, and records every piece of work as an event the stand-in reads back.

    podwork.py setup                 the environment install (pod_life setup_s)
    podwork.py fetch ID [ID ...]     the weights of these hub ids (models.yaml sizes at pod_life hf_mb_s)
    podwork.py job -- CMD ...        a job: runs CMD (the executor has waited for the weights' lock)
    podwork.py rsync ARGS ...        the pod's rsync: the real one, then the bytes it moved at pod_life rsync_mb_s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
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
        t0 = time.time()
        time.sleep(life.setup_s * SCALE)
        record("setup", t0, time.time())
        return 0
    if what == "fetch":
        facts = load_facts(REPO / "config" / "models.yaml")
        by_id = {m.get("id"): k for k, m in facts["models"].items()}
        for hub_id in argv[1:]:
            t0 = time.time()
            gb = podbill.weights_gb(facts, by_id[hub_id]) if hub_id in by_id else 0.0
            time.sleep(life.download_s(gb) * SCALE)
            record("download", t0, time.time(), model=hub_id, gb=gb)
        return 0
    if what == "job":
        cmd = argv[argv.index("--") + 1:]
        t0 = time.time()
        rc = subprocess.call(cmd)
        record("job", t0, time.time(), rc=rc)
        return rc
    if what == "rsync":  # stdin/stdout are rsync's protocol: nothing else may be written there
        t0 = time.time()
        with tempfile.NamedTemporaryFile("r", suffix=".rsync.log") as log:
            rc = subprocess.call(["/usr/bin/rsync", f"--log-file={log.name}", "--log-file-format=%l", *argv[1:]])
            # a file's line is "<date> <time> [pid] <length>"; the summary lines carry words
            moved = sum(int(m) for line in log.read().splitlines() for m in [line.rsplit("] ", 1)[-1]] if m.isdigit())
        # the bandwidth's time, of which the loopback rsync already took its own
        time.sleep(max(0.0, life.transfer_s(moved / 1e6) * SCALE - (time.time() - t0)))
        record("transfer", t0, time.time(), bytes=moved, rc=rc)
        return rc
    print(f"podwork: unknown work {what!r}; allowed: setup, fetch, job, rsync", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
