"""No orphans: a job ends when the Snakemake that started it dies (fourloops.lifeline).

The unit tests build Snakemake's own tree (starter -> bash -c "set -euo pipefail; python job" -> job)
with a stand-in starter; the end-to-end case, the smoke workflow's Snakemake SIGKILLed mid-generate (no
process of the run left within 5 s, nothing complete-looking written after the kill), is
tests/test_workflow.py::test_killed_generate_keeps_the_last_good_views[whole_run].
Processes of a run are found by a marker in their environment, never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from fourloops import lifeline

MARKER = "FOURLOOPS_TEST_RUN"


def processes_with(marker: str) -> list[int]:
    """Living (not zombie) processes whose environment holds MARKER=marker."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if needle in environ.split(b"\0") and state != b"Z":
            found.append(int(entry))
    return found


def wait_until(predicate, timeout: float, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(step)
    return predicate()


JOB = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from fourloops import lifeline
    lifeline.hold()
    Path(sys.argv[1]).write_text("holding")
    time.sleep(120)
""")

# The stand-in Snakemake: exports its pid and runs the job through bash as the local executor runs a
# script job ("set -euo pipefail; python ...": bash 5.2 execs the last command, so the job's parent is
# the starter itself), or with a bash that stays between them ("...; true": the parent-death signal
# then follows bash, and only the pidfd watch ends the job).
STARTER = textwrap.dedent("""
    import os, subprocess, sys, time
    os.environ["FOURLOOPS_SNAKEMAKE_PID"] = str(os.getpid())
    subprocess.Popen(sys.argv[3].format(python=sys.executable, job=sys.argv[1], ready=sys.argv[2]),
                     shell=True, executable="/bin/bash")
    time.sleep(120)
""")
SHAPES = {
    "bash-execs-job": ("set -euo pipefail; {python} {job} {ready}", 2),
    "bash-between": ("set -euo pipefail; {python} {job} {ready}; true", 3),
}


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "job.py").write_text(JOB)
    (tmp_path / "starter.py").write_text(STARTER)
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER: marker, "PYTHONPATH": os.pathsep.join(sys.path)}
    started = []

    def start(shape):
        ready = tmp_path / "ready"
        proc = subprocess.Popen([sys.executable, str(tmp_path / "starter.py"), str(tmp_path / "job.py"), str(ready),
                                 SHAPES[shape][0]], env=env)
        started.append(proc)
        assert wait_until(ready.exists, 30), "the job never started holding"
        return proc, marker

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    for pid in processes_with(marker):  # only ours: the marker is this test's own
        with contextlib.suppress(ProcessLookupError):  # listed, then ended by its lifeline before this kill
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("shape", SHAPES)
def test_sigkilled_starter_takes_its_job_with_it(tree, shape):
    starter, marker = tree(shape)
    assert len(processes_with(marker)) == SHAPES[shape][1]
    starter.kill()
    starter.wait()
    left = wait_until(lambda: not processes_with(marker), 5)
    assert left, f"still running 5 s after the starter died: {processes_with(marker)}"


def test_the_job_lives_while_its_starter_does(tree):
    starter, marker = tree("bash-between")
    time.sleep(1.0)
    assert len(processes_with(marker)) == 3


def test_a_dead_starter_is_refused():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with pytest.raises(lifeline.StarterGone, match=f"pid {dead.pid}"):
        lifeline.hold(dead.pid, on_exit=lambda: None)


def test_a_starter_that_is_not_an_ancestor_is_refused():
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(lifeline.StarterGone, match="not an ancestor"):
            lifeline.hold(other.pid, on_exit=lambda: None)
    finally:
        other.kill()
        other.wait()


def test_a_malformed_pid_variable_is_named(monkeypatch):
    monkeypatch.setenv(lifeline.ENV_VAR, "snakemake")
    with pytest.raises(ValueError, match="FOURLOOPS_SNAKEMAKE_PID = 'snakemake'"):
        lifeline.hold(on_exit=lambda: None)


def test_outside_a_workflow_there_is_nothing_to_watch(monkeypatch):
    monkeypatch.delenv(lifeline.ENV_VAR, raising=False)
    assert lifeline.hold(on_exit=lambda: None) is None


def test_ancestry_and_descendants_read_from_proc():
    child = subprocess.Popen(["/bin/bash", "-c", "sleep 30; true"])
    try:
        assert wait_until(lambda: lifeline.descendants(child.pid), 5)
        grandchild = lifeline.descendants(child.pid)[0]
        assert lifeline.ancestors(grandchild)[:2] == [child.pid, os.getpid()]
        assert child.pid in lifeline.descendants(os.getpid())
    finally:
        child.kill()
        child.wait()
