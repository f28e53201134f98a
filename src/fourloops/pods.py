"""Who owns which pod, and `fourloops pods reap` for the pods nobody live owns (the SIGKILL case).

Every run of the RunPod executor writes `<state dir>/<run id>.json` (default ~/.cache/fourloops/pods,
override with FOURLOOPS_POD_STATE_DIR) holding its pid, host, the pods it created and a heartbeat that a
thread refreshes while the run lives, and beside it `<run id>.keys-*/`, the run's own SSH key pair (mode 0700),
removed when the run ends. A run killed with SIGKILL leaves both; `fourloops pods reap`, finding the run dead,
removes them. A pod whose name carries our prefix is an orphan when no state file
claims it, or when its run's pid is dead on this host, or when the heartbeat is older than `stale_s`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

STALE_S = 120.0


def state_dir() -> Path:
    return Path(os.environ.get("FOURLOOPS_POD_STATE_DIR") or Path.home() / ".cache" / "fourloops" / "pods")


class RunRecord:
    """The state file of one live run."""

    def __init__(self, run_id: str, directory: Path | None = None):
        self.run_id = run_id
        self.path = (directory or state_dir()) / f"{run_id}.json"
        self.pods: dict[str, dict] = {}

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({
            "run_id": self.run_id, "pid": os.getpid(), "host": socket.gethostname(),
            "heartbeat": time.time(), "pods": self.pods,
        }))
        os.replace(tmp, self.path)

    def add(self, pod_id: str, name: str) -> None:
        self.pods[pod_id] = {"name": name, "created": time.time()}
        self.write()

    def remove(self, pod_id: str) -> None:
        self.pods.pop(pod_id, None)
        self.write()

    def keydir(self) -> Path:
        """A fresh directory (0700) for the run's SSH key pair, beside its state file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{self.run_id}.keys-", dir=self.path.parent))

    def close(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def forget(record: Path) -> None:
    """A dead run's state file and its SSH keys."""
    for keys in record.parent.glob(f"{record.stem}.keys-*"):
        shutil.rmtree(keys, ignore_errors=True)
    record.unlink(missing_ok=True)


def _pid_alive(pid: int) -> bool:
    import psutil

    return psutil.pid_exists(pid)


def live_owned(directory: Path | None = None, stale_s: float = STALE_S) -> set[str]:
    """Pod ids claimed by a run that is still alive (same host: its pid; any host: a fresh heartbeat)."""
    owned = set()
    d = directory or state_dir()
    if not d.is_dir():
        return owned
    now = time.time()
    for f in d.glob("*.json"):
        try:
            rec = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        fresh = now - float(rec.get("heartbeat", 0)) < stale_s
        if rec.get("host") == socket.gethostname():
            alive = _pid_alive(int(rec.get("pid", -1))) and fresh
        else:
            alive = fresh
        if alive:
            owned.update(rec.get("pods", {}))
        else:
            forget(f)  # the run is dead: its claim is void, its keys open nothing it still needs
    return owned


def reap(client, prefix: str = "fourloops", directory: Path | None = None, stale_s: float = STALE_S,
         timeout_s: float = 120.0, poll_s: float = 2.0, dry_run: bool = False, log=print) -> list:
    """Terminate every pod named `<prefix>-...` that no live run owns; verify each teardown."""
    from fourloops import runpod

    owned = live_owned(directory, stale_s)
    orphans = [p for p in client.list_pods()
               if str(p.get("name", "")).startswith(prefix + "-") and p.get("id") not in owned]
    results = []
    for pod in orphans:
        log(f"reap: {pod['id']} ({pod.get('name')}, {pod.get('status')}) is owned by no live run")
        if dry_run:
            continue
        since = runpod.parse_time(pod.get("createdAt")) or dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)
        td = runpod.terminate_verified(client, pod["id"], since, timeout_s=timeout_s, poll_s=poll_s)
        cost = "unknown" if td.cost_usd is None else f"${td.cost_usd:.4f}"
        log(f"reap: {pod['id']} terminated; gone from the pod list: {td.gone_from_list}; "
            f"billing stopped: {td.billing_stopped}; cost {cost}")
        results.append(td)
    if not orphans:
        log(f"reap: no orphaned {prefix}-* pods")
    return results


def main(argv=None) -> int:
    """`fourloops pods reap [--prefix P] [--dry-run] [--api-url URL]`"""
    from fourloops import machines, runpod

    ap = argparse.ArgumentParser(prog="fourloops pods")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("reap", help="terminate fourloops pods that no live run owns (verified teardown)")
    r.add_argument("--prefix", default=None, help="pod name prefix (default: config/machines.yaml pod.runpod.name_prefix)")
    r.add_argument("--api-url", default=None, help="RunPod v2 base URL (default https://api.runpod.io)")
    r.add_argument("--stale-s", type=float, default=STALE_S, help="a heartbeat older than this is dead")
    r.add_argument("--timeout-s", type=float, default=120.0, help="teardown verification timeout per pod")
    r.add_argument("--dry-run", action="store_true", help="list the orphans, terminate nothing")
    args = ap.parse_args(argv)
    prefix = args.prefix
    try:
        if prefix is None:
            prefix = ((machines.load().get("pod") or {}).get("runpod") or {}).get("name_prefix", "fourloops")
        key = runpod.read_api_key()
        if key.note:
            print(key.note, file=sys.stderr)
        client = runpod.Client(key.value, args.api_url)
        results = reap(client, prefix, stale_s=args.stale_s, timeout_s=args.timeout_s, dry_run=args.dry_run)
    except (runpod.RunPodError, machines.MachinesError) as err:
        print(f"fourloops pods reap: {err}", file=sys.stderr)
        return 2
    return 0 if all(td.verified for td in results) else 1


if __name__ == "__main__":
    sys.exit(main())
