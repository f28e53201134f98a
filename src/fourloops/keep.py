"""A failed rerun keeps the last good outputs of the expensive stages.

Snakemake deletes a job's existing outputs (and its log) in `Job.prepare`, just before the job
runs, and again after a failure (`Job.cleanup`, "might be corrupted"). Its own `update()` flag keeps
a copy, but after a failure it writes the failed job's params into the restored file's metadata, so
a changed config would then count as built. So, before the first job, the outputs of every pending
job worth keeping are hard-linked (no bytes copied) into a hidden stash under the working directory,
with a copy of Snakemake's metadata record of each (written in place, so a link would follow the
new job's record); under Snakemake's database backend (`--persistence-backend db`) the record is a row of its
table, kept by value in the manifest (a `Rows`, fourloops.lastgood.DatabaseRecords, reads and puts it back). When the
run ends, `settle` restores each job whose new outputs are not all
there and drops the rest. A stash left by a Snakemake that was killed is settled by the next
workflow parse (`recover`), before its DAG is built.

Outputs must be replaced by rename (fourloops.io) or deleted, never rewritten in place: a rewrite
in place would change the stashed link too.
"""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from fourloops.io import read_json, write_json

STASH = ".fourloops-keep"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class JobFiles:
    """One job's files, as paths relative to the working directory (or under it)."""

    outputs: list[str]  # kept by hard link, restored together or not at all
    records: list[str] = field(default_factory=list)  # small files rewritten in place: kept by copy
    markers: list[str] = field(default_factory=list)  # removed when the job is restored (incomplete markers)
    rows: list[str] = field(default_factory=list)  # keys of the outputs' database records: kept by value (Rows, below)



# Rows: Snakemake's records kept in a database (its `--persistence-backend db`), one row per output key; any object
# with `where` (names the database, no password: a stash is settled only through the same one), `read(key)` (the
# row as JSON values, None: no row) and `write(key, row)` (row None: delete it). fourloops.lastgood.DatabaseRecords.


def _relative(root: Path, path: str) -> str:
    p = Path(path)
    resolved = (p if p.is_absolute() else root / p).resolve()
    try:
        return str(resolved.relative_to(root.resolve()))
    except ValueError:
        raise ValueError(f"keep: {path!r} is outside the working directory {root}; "
                         "allowed: paths under it") from None


def _link(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)
    except OSError as err:
        if err.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        shutil.copy2(src, dest)  # another filesystem, or links refused: a copy keeps it as well


def _inode(path: Path) -> list[int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return [st.st_dev, st.st_ino]


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22): pid plus this names one process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat[stat.rindex(b")") + 2 :].split()[19].decode()


def _alive(owner: dict) -> bool:
    now = _start_time(int(owner["pid"]))
    return now is not None and now == owner["start_time"]


def stash_dir(root: str | os.PathLike) -> Path:
    return Path(root) / STASH


def stash(root: str | os.PathLike, jobs: list[JobFiles], owner_pid: int | None = None,
          rows=None) -> list[JobFiles]:
    """Keep the current outputs of `jobs` until `settle`: every output that exists (a job with one output lost,
    a loss curve or a view, still has the rest of its last good generation, which Snakemake deletes before the job
    runs); the jobs kept are returned. A stash left by a dead run is settled first; one held by a live run is
    refused (Snakemake's lock should have stopped this run). `rows`: where the jobs' `rows` are kept."""
    root = Path(root)
    if rows is None and any(job.rows for job in jobs):
        raise ValueError("keep: jobs with database records (JobFiles.rows) were given no Rows to read them from")
    recover(root, rows)
    here = stash_dir(root)
    if (here / MANIFEST).exists():
        owner = read_json(here / MANIFEST)["owner"]
        raise RuntimeError(f"keep: {here} belongs to a running Snakemake (pid {owner['pid']}); "
                           "allowed: one run per working directory")
    shutil.rmtree(here, ignore_errors=True)  # an unfinished stash without its manifest kept nothing
    pid = os.getpid() if owner_pid is None else owner_pid
    kept, entries = [], []
    for job in jobs:
        outputs = [_relative(root, p) for p in job.outputs]
        if not any((root / p).is_file() for p in outputs):
            continue
        n = len(entries)
        for p in outputs:
            if (root / p).is_file():
                _link(root / p, here / str(n) / "outputs" / p)
        records = [_relative(root, p) for p in job.records]
        for p in records:
            if (root / p).is_file():
                dest = here / str(n) / "records" / p
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / p, dest)
        entries.append({
            # None: missing before the job, or not a file (nothing was linked, nothing to put back)
        "outputs": {p: _inode(root / p) if (root / p).is_file() else None for p in outputs},
            "records": [p for p in records if (root / p).is_file()],
            "markers": [_relative(root, p) for p in job.markers],
        })
        if job.rows:
            entries[-1]["rows"] = {key: rows.read(key) for key in job.rows}
        kept.append(job)
    if entries:  # the manifest last: a stash without one holds nothing to restore
        manifest = {"owner": {"pid": pid, "start_time": _start_time(pid)}, "jobs": entries}
        if any("rows" in entry for entry in entries):
            manifest["rows"] = rows.where
        write_json(here / MANIFEST, manifest)
    return kept


def settle(root: str | os.PathLike, rows=None) -> list[str]:
    """End of run: restore every kept job whose outputs were not all replaced by new files (the new ones of a
    generation that did not finish are removed, the kept ones linked back; one missing before stays missing, so its
    record's check reruns the job), drop the stash. Returns the restored outputs (relative paths). A restored job's
    database rows are put back first (a settle killed midway is redone whole), through `rows`, the same database."""
    root = Path(root)
    here = stash_dir(root)
    if not (here / MANIFEST).exists():
        shutil.rmtree(here, ignore_errors=True)
        return []
    manifest = read_json(here / MANIFEST)
    if "rows" in manifest and (rows is None or rows.where != manifest["rows"]):
        raise RuntimeError(f"keep: {here} holds Snakemake's records of its outputs in the database {manifest['rows']}, "
                           f"which this run does not keep its metadata in ({rows.where if rows else 'files'}); "
                           "allowed: run again with the killed run's --persistence-backend db (and its "
                           "--persistence-backend-db-url), which puts them back")
    restored = []
    for n, entry in enumerate(manifest["jobs"]):
        now = {p: _inode(root / p) for p in entry["outputs"]}
        replaced = all(now[p] is not None and now[p] != old for p, old in entry["outputs"].items())
        untouched = all(now[p] == old for p, old in entry["outputs"].items())
        if replaced or untouched:
            continue
        for key, row in entry.get("rows", {}).items():
            rows.write(key, row)
        for p in entry["outputs"]:
            target = root / p
            if now[p] is not None and now[p] != entry["outputs"][p]:
                target.unlink()  # part of a generation that did not finish
            if entry["outputs"][p] is not None and now[p] != entry["outputs"][p]:
                _link(here / str(n) / "outputs" / p, target)
        for p in entry["records"]:
            (root / p).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(here / str(n) / "records" / p, root / p)
        for p in entry["markers"]:
            (root / p).unlink(missing_ok=True)
        restored.extend(p for p, old in entry["outputs"].items() if old is not None)
    shutil.rmtree(here)
    return restored


def recover(root: str | os.PathLike, rows=None) -> list[str]:
    """Settle a stash whose run died without settling it (SIGKILL); leave a live run's alone."""
    here = stash_dir(root)
    if not (here / MANIFEST).exists():
        return []
    if _alive(read_json(here / MANIFEST)["owner"]):
        return []
    return settle(root, rows)
