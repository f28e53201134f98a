"""No orphans: a job process ends when the Snakemake that started it dies.

Snakemake 9.27's local executor runs a `script:` job from a worker thread as
`Popen("set -euo pipefail; python <script>", shell=True)`; bash 5.2 execs the last command, so the
job's parent is that Snakemake thread (measured: tests/test_lifeline.py). A parent-death signal
(prctl PR_SET_PDEATHSIG) then fires when Snakemake dies. Where something stays between them (an older
bash, another shell, a wrapper), the parent outlives a SIGKILLed Snakemake and that signal never
comes; so the job also watches the Snakemake pid the workflow exports at parse time (ENV_VAR) through
a pidfd (poll wakes the moment the process exits), and then kills its own descendants and itself
with SIGKILL, which drops any CUDA context and so frees the card.

A killed job leaves only hidden temporaries (fourloops.io writes by rename), never a complete-looking
output.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import signal
import sys
import threading

ENV_VAR = "FOURLOOPS_SNAKEMAKE_PID"
PR_SET_PDEATHSIG = 1

log = logging.getLogger(__name__)


class StarterGone(RuntimeError):
    """The Snakemake that started this job is no longer running."""


def parent_of(pid: int) -> int | None:
    """The parent pid from /proc/<pid>/stat; None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # comm (field 2) is in parentheses and may itself hold spaces or parentheses
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def ancestors(pid: int) -> list[int]:
    """pid's parent, grandparent, ... up to init."""
    chain = []
    while (parent := parent_of(pid)) not in (None, 0):
        chain.append(parent)
        pid = parent
    return chain


def descendants(pid: int) -> list[int]:
    """Every living descendant of pid (children first), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = parent_of(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def end_process_tree() -> None:
    """SIGKILL this process's descendants, then this process (no cleanup: the card is freed by the kernel)."""
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.kill(os.getpid(), signal.SIGKILL)


def set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    """Linux prctl(PR_SET_PDEATHSIG): the kernel sends `sig` when this process's parent thread exits."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG): {os.strerror(err)}")


def _watch(pidfd: int, starter: int, on_exit) -> None:
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    while not poller.poll():  # a pidfd turns readable when its process exits
        pass
    print(f"lifeline: Snakemake (pid {starter}) that started this job is gone; ending job pid {os.getpid()}",
          file=sys.stderr, flush=True)
    on_exit()


def hold(starter: int | None = None, on_exit=end_process_tree) -> threading.Thread | None:
    """Tie this process's life to the Snakemake `starter` (default: the pid in $FOURLOOPS_SNAKEMAKE_PID).

    Returns the watchdog thread, or None outside a workflow (no variable set: nothing to watch).
    Raises StarterGone when the starter is already dead, or was never an ancestor of this process
    (its pid then names some other process: the job was reparented before it could look).
    """
    if starter is None:
        raw = os.environ.get(ENV_VAR)
        if not raw:
            return None
        try:
            starter = int(raw)
        except ValueError:
            raise ValueError(f"{ENV_VAR} = {raw!r}: not a process id; allowed: the pid of the running Snakemake")
    parent = os.getppid()
    set_parent_death_signal()
    if os.getppid() != parent:  # the parent died between fork and prctl: no signal will come
        raise StarterGone(f"this job's parent (pid {parent}) exited before the job started")
    try:
        pidfd = os.pidfd_open(starter)
    except ProcessLookupError:
        raise StarterGone(f"the Snakemake that started this job (pid {starter}, {ENV_VAR}) is not running") from None
    # Checked after opening the pidfd: a pid reused by another process is never our ancestor.
    if starter not in ancestors(os.getpid()):
        os.close(pidfd)
        raise StarterGone(f"pid {starter} ({ENV_VAR}) is not an ancestor of this job (pid {os.getpid()}): "
                          "the Snakemake that started it is gone")
    thread = threading.Thread(target=_watch, args=(pidfd, starter, on_exit), name="fourloops-lifeline", daemon=True)
    thread.start()
    log.info("lifeline: this job ends when Snakemake pid %d does", starter)
    return thread
