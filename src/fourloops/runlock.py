"""One run per working directory, and the leftovers of killed runs removed at the next run's start.

Snakemake's own lock (.snakemake/locks) lists only the files of the jobs each run will execute, and refuses
a second run only where those overlap; a second run whose pending jobs share no file with the first's starts,
and both then write the same metadata and records ("Unable to obtain modification time ... concurrent
process"). Here the run holds an flock on `.snakemake/fourloops-run.lock` for its whole life (the kernel
drops it when the process dies, SIGKILL included), with its pid and invocation inside, so a second run is
refused before any job and told which run holds the directory. Holding it also proves that no run owns the
staging folders and temporaries under results/ that a killed job left: they are removed then.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import datetime as dt
import fcntl
import json
import os
import shutil
from pathlib import Path

LOCK = ".snakemake/fourloops-run.lock"
_held: dict[str, int] = {}  # working directory -> the open, locked file descriptor (kept for the process's life)


class RunLockError(RuntimeError):
    """Another live run holds the working directory; the message names it."""


def hold(workdir: str | os.PathLike, invocation: str = "") -> None:
    """Take the working directory for this process, or raise RunLockError naming the run that holds it."""
    root = Path(workdir).resolve()
    if str(root) in _held:
        return
    path = root / LOCK
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise RunLockError(f"{path}: cannot hold the working directory ({err.strerror}); allowed: a writable working "
                           "directory with room (nothing was run or written)") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read(fd)
        os.close(fd)
        raise RunLockError(
            f"another Snakemake is running in this working directory ({root}): pid {holder.get('pid', '?')}, "
            f"started {holder.get('started', '?')}, `{holder.get('invocation') or '?'}`; nothing was run or written. "
            f"Allowed: one run per working directory: wait for it to end, or stop it (kill {holder.get('pid', '<pid>')}); "
            "a dry-run (-n) may run beside it") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "invocation": invocation,
                                  "started": dt.datetime.now().astimezone().isoformat(timespec="seconds")}).encode(), 0)
    except OSError:
        pass  # a full disk: the lock holds all the same; only its holder's name is missing
    _held[str(root)] = fd


def _read(fd: int) -> dict:
    try:
        data = json.loads(os.pread(fd, 65536, 0) or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _alive(pid: int) -> bool:
    import psutil

    return psutil.pid_exists(pid)


def clear_leftovers(workdir: str | os.PathLike, under: str = "results") -> list[str]:
    """Remove what killed jobs left under `under`: `.views-partial-<pid>` folders whose process is gone and the
    temporaries of fourloops.io's atomic writes (`.<name>.<random>.partial`). Call only while holding the
    run lock. Returns the removed paths, relative to `workdir`."""
    from fourloops.stages.generate import STAGING_PREFIX  # its staging folders, .views-partial-<pid>

    root = Path(workdir)
    base = root / under
    if not base.is_dir():
        return []
    removed = []
    for path in sorted(base.rglob(".*")):
        name = path.name
        if name.startswith(STAGING_PREFIX):
            pid = name[len(STAGING_PREFIX):]
            if pid.isdigit() and _alive(int(pid)):
                continue  # a live process of that number: leave it (a reused pid costs only a folder)
        elif not name.endswith(".partial"):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists() or path.is_symlink():
            path.unlink(missing_ok=True)
        else:
            continue  # inside a folder removed above
        removed.append(str(path.relative_to(root)))
    return removed
