"""A full or read-only disk (fourloops.space): refused before Snakemake deletes anything, in one line each;
inside a job, one line, not a traceback. Real filesystems: small tmpfs mounts (root with CAP_SYS_ADMIN, as the
project's test machines run; elsewhere these tests are skipped, saying why)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import run_snakemake
from fourloops import io, jobs, space


@pytest.fixture
def small_fs(tmp_path):
    """A 256 KiB tmpfs at tmp_path/fs; yields (path, remount) where remount('ro'|'rw') changes it."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()}): needs root with CAP_SYS_ADMIN")

    def remount(mode: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{mode}", str(mnt)], check=True)
    try:
        yield mnt, remount
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(folder: Path) -> None:
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as err:
        assert err.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_room_and_writability_are_checked_and_named(small_fs):
    mnt, remount = small_fs
    assert space.problems({f"{mnt}/results/fit/A.json": 1000}) == []
    fill(mnt)
    found = space.problems({f"{mnt}/results/fit/A.json": 1000})     # the folder does not exist yet: its parent
    assert len(found) == 1 and found[0].startswith(f"{mnt}: ") and "free on its filesystem" in found[0], found
    (mnt / "filler").unlink()
    remount("ro")
    found = space.problems({f"{mnt}/a.json": 10, f"{mnt}/b.json": 10})
    assert len(found) == 1 and "cannot be written (Read-only file system" in found[0] and "2 output(s)" in found[0]


def test_a_full_disk_inside_a_job_ends_in_one_line_naming_the_path(small_fs, monkeypatch):
    mnt, _ = small_fs
    fill(mnt)
    smk = SimpleNamespace(threads=1, log=[], resources=SimpleNamespace(keys=lambda: []), params=SimpleNamespace(keys=lambda: []), rule="fit",
                          wildcards=SimpleNamespace(items=lambda: []), input=[],
                          output=SimpleNamespace(items=lambda: [("out", str(mnt / "out.bin"))],
                                                 provenance=str(mnt / "p.json")))
    monkeypatch.delenv("FOURLOOPS_SNAKEMAKE_PID", raising=False)
    with pytest.raises(SystemExit) as err:
        with jobs.job(smk):
            io.write_bytes(mnt / "out.bin", b"\1" * 300_000)      # the project's atomic writer
    msg = str(err.value.code)
    assert msg.startswith(f"rule fit: {mnt}: No space left on device (") and "\n" not in msg, msg
    assert list(mnt.glob(".out.bin.*")) == []                # nothing that looks complete, no temporary
    with pytest.raises(ValueError):                           # not a disk error: the job's own traceback
        with jobs.job(smk):
            raise ValueError("a bug")
    assert space.one_line(OSError(errno.ENOENT, "No such file", "x")) is None


def test_a_full_or_read_only_results_folder_is_refused_before_any_job_and_keeps_every_record(built_copy, small_fs):
    mnt, remount = small_fs
    fit = built_copy / "results" / "fit"
    for f in fit.iterdir():
        shutil.copy2(f, mnt / f.name)
    shutil.rmtree(fit)
    os.symlink(mnt, fit)                                      # results/fit on its own, small filesystem
    records = {p: p.read_bytes() for p in (built_copy / "results" / "provenance" / "fit").iterdir()}
    fill(mnt)
    for mode in ("full", "ro"):
        if mode == "ro":  # fit's outputs gone, the folder read-only (with the files there, Snakemake itself
            for f in mnt.iterdir():  # refuses them as write-protected before any job)
                f.unlink()
            remount("ro")
        proc = run_snakemake(built_copy, "--forcerun", "fit", "--", "results/ladder.csv", check=False)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0 and "Traceback" not in out, out[-3000:]
        why = "no room" if mode == "full" else "cannot be written (Read-only file system"
        assert f"{mnt}: {why}" in out or f"results/fit: {why}" in out, out[-3000:]
        assert "nothing was run or written" in out
        assert {p: p.read_bytes() for p in records} == records
        assert (fit / "A.json").exists() == (mode == "full")
