"""One run per working directory (fourloops.runlock), and the leftovers of killed jobs removed at the next run's
start: the library, then the smoke workflow's CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO, SNAKEMAKE, job_process, run_snakemake, snakemake_env
from fourloops import runlock

HOLDER = ("import sys, time; from fourloops import runlock; runlock.hold(sys.argv[1], 'snakemake results/ladder.csv'); "
          "print('held', flush=True); time.sleep(600)")


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_second_holder_is_refused_naming_the_first_until_it_dies(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
    try:
        assert holder.stdout.readline().strip() == "held"
        try:
            runlock.hold(tmp_path)
            raise AssertionError("a second holder was let in")
        except runlock.RunLockError as err:
            msg = str(err)
        assert f"pid {holder.pid}" in msg and "`snakemake results/ladder.csv`" in msg and "nothing was run" in msg
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    runlock.hold(tmp_path)                   # the kernel dropped the dead holder's lock


def test_leftovers_of_dead_jobs_are_removed_and_a_live_ones_folder_is_kept(tmp_path):
    gen = tmp_path / "results" / "generate" / "B"
    dead = gen / f".views-partial-{dead_pid()}"
    live = gen / f".views-partial-{os.getpid()}"
    for folder in (dead, live):
        folder.mkdir(parents=True)
        (folder / "az000.png").write_bytes(b"half a png")
    temp = tmp_path / "results" / "fit" / ".B.json.k3x9.partial"
    temp.parent.mkdir(parents=True)
    temp.write_text("{")
    kept = [gen / "views.json", tmp_path / "results" / ".hidden-but-ours"]
    for f in kept:
        f.write_text("{}")
    removed = runlock.clear_leftovers(tmp_path)
    assert sorted(removed) == sorted(str(p.relative_to(tmp_path)) for p in (dead, temp))
    assert not dead.exists() and not temp.exists() and live.is_dir() and all(f.exists() for f in kept)


def test_a_second_run_is_refused_at_once_naming_the_running_one(built_copy):
    """The first run's fit[A] job is held (SIGSTOP) mid-run; the second asks for fit[floor_gt], whose files
    Snakemake's own lock (the files of each run's pending jobs only) does not share with the first's."""
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--profile", str(REPO / "profiles" / "smoke"),
           "--directory", str(built_copy), "--forcerun", "fit", "--", "results/fit/A.json"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=snakemake_env(), start_new_session=True)
    try:
        os.kill(job_process(first, "fit.py"), signal.SIGSTOP)
        before = sorted(p for p in (built_copy / "results").rglob("*"))
        t0 = time.monotonic()
        second = run_snakemake(built_copy, "--forcerun", "fit", "--", "results/fit/floor_gt.json", check=False)
        out = second.stdout + second.stderr
        assert second.returncode != 0, out[-3000:]
        assert f"another Snakemake is running in this working directory ({built_copy.resolve()}): pid {first.pid}" \
            in out, out[-3000:]
        assert "Traceback" not in out and "rule fit" not in out
        assert sorted(p for p in (built_copy / "results").rglob("*")) == before
        print(f"refused in {time.monotonic() - t0:.1f} s")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()


def test_the_next_run_removes_a_killed_jobs_staging_folder(built_copy):
    staging = built_copy / "results" / "generate" / "B" / f".views-partial-{dead_pid()}"
    staging.mkdir()
    (staging / "az000.png").write_bytes(b"half a png")
    # a killed model build's temporary folder (fourloops.io.atomic_dir; the sizing set's are GBs)
    build = built_copy / "models" / "smoke" / ".generator-qwen_image_edit_plus.k3x9.partial"
    build.mkdir()
    (build / "model.safetensors").write_bytes(b"half")
    proc = run_snakemake(built_copy, "results/ladder.csv")
    assert not staging.exists() and not build.exists()
    for left in (staging, build):
        assert f"removed {left.relative_to(built_copy)}, left by a killed job" in proc.stderr, proc.stderr[-2000:]
    assert "Nothing to be done" in proc.stdout + proc.stderr
