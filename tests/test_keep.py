"""A failed rerun keeps the last good outputs (fourloops.keep): the library on plain files. The smoke
workflow's `generate` killed mid-rerun (the last good generation back byte for byte with its record, the
"kept the last good" line, no stash left, a later run replacing it) is
tests/test_workflow.py::test_killed_generate_keeps_the_last_good_views."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fourloops import keep


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def replace(path: Path, text: str) -> None:
    """A new generation, written as the stages write: a new file renamed over the old."""
    tmp = path.with_name("." + path.name + ".partial")
    tmp.write_text(text)
    os.replace(tmp, path)


@pytest.fixture
def previous(tmp_path):
    """One job's last good generation: two views, a manifest, Snakemake's record and marker of it."""
    for name in ("az000.png", "az090.png", "views.json"):
        write(tmp_path / "results/generate/B" / name, f"old {name}")
    write(tmp_path / ".snakemake/metadata/rec", '{"params": "old"}')
    job = keep.JobFiles(
        outputs=[f"results/generate/B/{n}" for n in ("az000.png", "az090.png", "views.json")],
        records=[str(tmp_path / ".snakemake/metadata/rec")],
        markers=[".snakemake/incomplete/rec"],
    )
    return tmp_path, job


def contents(root: Path, job: keep.JobFiles) -> dict:
    return {p: (root / p).read_text() if (root / p).exists() else None for p in job.outputs}


def test_a_failed_job_gets_its_previous_generation_back(previous):
    root, job = previous
    before = contents(root, job)
    assert keep.stash(root, [job]) == [job]
    for p in job.outputs:  # Snakemake's prepare
        (root / p).unlink()
    replace(root / job.outputs[0], "new, then the job died")
    write(root / ".snakemake/metadata/rec", '{"params": "new"}')  # rewritten in place by finished()
    write(root / ".snakemake/incomplete/rec", "{}")
    assert sorted(keep.settle(root)) == sorted(job.outputs)
    assert contents(root, job) == before
    assert (root / ".snakemake/metadata/rec").read_text() == '{"params": "old"}'
    assert not (root / ".snakemake/incomplete/rec").exists()
    assert not keep.stash_dir(root).exists()


def test_a_complete_new_generation_replaces_the_old(previous):
    root, job = previous
    keep.stash(root, [job])
    for p in job.outputs:
        (root / p).unlink()
        replace(root / p, "new")
    write(root / ".snakemake/metadata/rec", '{"params": "new"}')
    assert keep.settle(root) == []
    assert set(contents(root, job).values()) == {"new"}
    assert (root / ".snakemake/metadata/rec").read_text() == '{"params": "new"}'
    assert not keep.stash_dir(root).exists()


def test_a_job_that_never_ran_is_left_as_it_is(previous):
    root, job = previous
    before = contents(root, job)
    keep.stash(root, [job])
    assert keep.settle(root) == []
    assert contents(root, job) == before


def test_stashing_links_and_copies_no_bytes_of_outputs(previous):
    root, job = previous
    keep.stash(root, [job])
    kept = keep.stash_dir(root) / "0" / "outputs" / job.outputs[0]
    assert os.stat(kept).st_ino == os.stat(root / job.outputs[0]).st_ino
    record = keep.stash_dir(root) / "0" / "records" / ".snakemake/metadata/rec"
    assert os.stat(record).st_ino != os.stat(root / ".snakemake/metadata/rec").st_ino


def test_a_generation_with_one_output_lost_keeps_the_rest_through_a_failed_rerun(previous):
    """One view (or a LoRA's loss curve) deleted: Snakemake reruns the job and deletes the outputs that are left
    first; when the rerun fails, those come back and the lost one stays lost, so its record's check reruns the job."""
    root, job = previous
    (root / job.outputs[1]).unlink()
    before = contents(root, job)
    assert keep.stash(root, [job]) == [job]
    for p in (job.outputs[0], job.outputs[2]):  # Snakemake's prepare
        (root / p).unlink()
    replace(root / job.outputs[1], "new, then the job died")
    write(root / ".snakemake/metadata/rec", '{"params": "new"}')
    assert sorted(keep.settle(root)) == sorted([job.outputs[0], job.outputs[2]])
    assert contents(root, job) == before and before[job.outputs[1]] is None
    assert (root / ".snakemake/metadata/rec").read_text() == '{"params": "old"}'
    # and a rerun that completes replaces it all
    keep.stash(root, [job])
    for p in job.outputs:
        (root / p).unlink(missing_ok=True)
        replace(root / p, "new")
    assert keep.settle(root) == [] and set(contents(root, job).values()) == {"new"}


def test_a_job_with_no_output_left_keeps_nothing(previous):
    root, job = previous
    for p in job.outputs:
        (root / p).unlink()
    assert keep.stash(root, [job]) == []
    assert not keep.stash_dir(root).exists()


def test_a_dead_runs_stash_is_recovered_and_a_live_ones_is_not(previous):
    root, job = previous
    before = contents(root, job)
    dead = subprocess.Popen(["true"])
    dead.wait()
    keep.stash(root, [job], owner_pid=dead.pid)
    for p in job.outputs:
        (root / p).unlink()
    assert sorted(keep.recover(root)) == sorted(job.outputs)
    assert contents(root, job) == before

    keep.stash(root, [job])  # owned by this (live) process
    for p in job.outputs:
        (root / p).unlink()
    assert keep.recover(root) == []
    assert contents(root, job) == dict.fromkeys(job.outputs)
    with pytest.raises(RuntimeError, match=f"running Snakemake \\(pid {os.getpid()}\\)"):
        keep.stash(root, [job])
    keep.settle(root)
    assert contents(root, job) == before


def test_a_path_outside_the_working_directory_is_refused_and_nothing_is_stashed(previous, tmp_path_factory):
    root, job = previous
    outside = write(tmp_path_factory.mktemp("elsewhere") / "x.png", "x")
    with pytest.raises(ValueError, match=f"'{outside}' is outside the working directory"):
        keep.stash(root, [keep.JobFiles(outputs=[str(outside)])])
    assert not keep.stash_dir(root).exists()


# A one-rule workflow driving fourloops' keep wiring (fourloops.lastgood's stash/settle/recover, real), its one job
# keeping its last good outputs; scale 2 fails, scale 4 kills Snakemake (the job's parent) mid-job, once it has marked
# the job started.
KEEPING_SNAKEFILE = """
from fourloops.lastgood import LastGood

KEEP = LastGood(workflow)
KEEP.recover()

rule make:
    output: "out.txt"
    params: scale=config.get("scale", 1)
    shell: "case {params.scale} in 2) exit 1;; 4) sleep 1; kill -9 $PPID; exit 1;; esac; echo {params.scale} > {output}"

onstart:
    KEEP.stash([j for j in workflow.dag.needrun_jobs() if j.rule.output])

onsuccess:
    KEEP.settle()

onerror:
    KEEP.settle()
"""


def test_under_the_database_backend_a_kept_output_comes_back_with_its_row(tmp_path):
    """`--persistence-backend db`: Snakemake's record of each output is a row of .snakemake/metadata.db, which the
    failed job rewrites with its new params; the kept output comes back with its old row, so the changed params
    still rerun it (as the file backend's record file does), and after a killed run the next parse puts the row
    back too (no incomplete mark left on the kept output)."""
    (tmp_path / "Snakefile").write_text(KEEPING_SNAKEFILE)

    def smk(*args, check=True):
        proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", "Snakefile", "--cores", "1",
                               "--persistence-backend", "db", *args], cwd=tmp_path, capture_output=True, text=True)
        assert not check or proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout + proc.stderr

    smk()
    failed = smk("--config", "scale=2", check=False)
    assert "kept the last good out.txt" in failed, failed[-3000:]
    assert (tmp_path / "out.txt").read_text() == "1\n"
    assert "Nothing to be done" in smk("-n")                      # the old output with its old params
    assert "params" in smk("-n", "--config", "scale=2")           # the new ones still rerun it
    smk("--config", "scale=4", check=False)                        # Snakemake killed mid-job
    assert keep.stash_dir(tmp_path).exists()
    assert "Nothing to be done" in smk("-n")                      # its parse settled the killed run's stash
    assert (tmp_path / "out.txt").read_text() == "1\n" and not keep.stash_dir(tmp_path).exists()
    smk("--unlock")                                                # the lock the killed run left
    smk("--config", "scale=3")
    assert (tmp_path / "out.txt").read_text() == "3\n" and not keep.stash_dir(tmp_path).exists()


def test_database_rows_come_back_only_through_the_database_they_were_kept_from(tmp_path):
    """A killed run's stash holding database rows: an invocation keeping its metadata elsewhere is refused, naming
    the database and leaving the stash; the same database gets each row back (one that did not exist is deleted)."""
    from snakemake.persistence.db import DbPersistence

    from fourloops.lastgood import DatabaseRecords

    rows = DatabaseRecords(DbPersistence(nolock=True, path=tmp_path / ".snakemake"))
    write(tmp_path / "a.txt", "old a")
    write(tmp_path / "b.txt", "old b")
    rows.write("a.txt", {"rule": "make", "params": ["1"], "record_format_version": 6})
    dead = subprocess.Popen(["true"])
    dead.wait()
    keep.stash(tmp_path, [keep.JobFiles(outputs=["a.txt", "b.txt"], rows=["a.txt", "b.txt"])], owner_pid=dead.pid,
               rows=rows)
    for name in ("a.txt", "b.txt"):  # the killed job: outputs deleted, rows rewritten with its params, marked
        (tmp_path / name).unlink()
        rows.write(name, {"rule": "make", "params": ["2"], "record_format_version": 6, "incomplete": True})
    with pytest.raises(RuntimeError, match=f"in the database sqlite:///{tmp_path}/.snakemake/metadata.db "
                                           f"\\(namespace {tmp_path}/.snakemake\\), which this run does not keep its "
                                           "metadata in \\(files\\)"):
        keep.recover(tmp_path)
    assert keep.stash_dir(tmp_path).exists() and not (tmp_path / "a.txt").exists()
    assert sorted(keep.recover(tmp_path, rows)) == ["a.txt", "b.txt"]
    assert (tmp_path / "a.txt").read_text() == "old a" and not keep.stash_dir(tmp_path).exists()
    assert rows.read("a.txt")["params"] == ["1"] and not rows.read("a.txt")["incomplete"]
    assert rows.read("b.txt") is None
