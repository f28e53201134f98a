"""The output check before a run: every existing output against the provenance record that made it.

Snakemake judges a file by its mtime and its metadata, never by its bytes: a truncated render, an
edited keypoints file or views deleted by a killed job all count as up to date, and the next job
reads them. Here each record (fourloops.records) is compared with the disk:

- every output it lists must exist with the recorded size and sha256 (missing / truncated / edited);
- every input it lists that the workflow made (another record lists it as an output, or a job of
  the run makes it) must still hold the bytes the job read (input gone / input changed): a job whose
  inputs are gone consumed bytes nobody can reproduce from the disk;
- every job the run uses (`expected`) whose outputs exist must have its record: an output without
  one is unverified (its record was deleted, or its job was killed after Snakemake removed it);
- checked alone (no `expected`: "is my directory sound?"), an existing output that Snakemake marks
  incomplete (`.snakemake/incomplete/`, or under `--persistence-backend db` the rows of
  `.snakemake/metadata.db` or of the URL the runs were given: its job started and Snakemake never saw it
  finish, e.g. a SIGINT to Snakemake alone lets the job write every output and its record, then stops
  before Snakemake clears the marks) is incomplete: its bytes may match its record, yet the next run makes
  it again (`rerun-incomplete`) or refuses to start until it is. In a run, Snakemake itself acts on them.

Each problem names the record whose job must run again; the record file is itself an output of
that job, so its path names the job to Snakemake. sha256 is cached by (path, size, mtime_ns,
ctime_ns, inode) in `.snakemake/fourloops-hashes.json`, so a warm check of a whole working directory
reads no bytes; the ctime, which no ordinary tool sets back, catches a rewrite in place that kept
size and mtime.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from fourloops import io, records
from fourloops.io import sha256_file
from fourloops.records import Record, norm

HASH_CACHE = ".snakemake/fourloops-hashes.json"
HASH_SCHEMA = "fourloops.hashes/2"
INCOMPLETE = ".snakemake/incomplete"  # Snakemake's marks: one file per output of a job that has not finished
METADATA_DB = ".snakemake/metadata.db"  # the same marks (and metadata) under --persistence-backend db, by default
# What can be wrong, in the order describe() lists them.
KINDS = ("unreadable record", "unverified", "incomplete", "missing", "truncated", "edited", "input gone",
         "input changed")


@dataclass(frozen=True)
class Expected:
    """A job the run uses that writes a provenance record: the record's path and the job's other outputs."""

    record: str
    outputs: tuple[str, ...]
    rule: str
    wildcards: dict = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Problem:
    path: str            # the file that is wrong (or the unreadable record)
    kind: str            # one of KINDS
    detail: str          # e.g. "100 of 30751 bytes", "sha256 1a2b3c4d5e6f, recorded 0f9e8d7c6b5a"
    record: str          # the record of the job that must run again (an output of that job)
    rule: str
    wildcards: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def job(self) -> str:
        """'generate[condition=B]', as the gate's tables name a job."""
        tag = ",".join(f"{k}={v}" for k, v in sorted(self.wildcards.items()))
        return (self.rule or "?") + (f"[{tag}]" if tag else "")

    @property
    def why(self) -> str:
        return f"{self.path} {self.kind}" + (f": {self.detail}" if self.detail else "")


class HashCache:
    """sha256 by (path, size, mtime_ns, ctime_ns, inode); a changed key, or a file gone, drops the entry."""

    def __init__(self, file: str | Path | None):
        """`file`: the cache's JSON file, or None for no cache (every file is read)."""
        self.file = None if file is None else Path(file)
        self.entries: dict[str, dict] = {}
        self.hashed = 0          # files read this check (the rest came from the cache)
        self._changed = False
        if self.file is None:
            return
        try:
            data = io.read_json(self.file)
        except (OSError, ValueError):
            return               # no cache, or a broken one: a cache is only ever a shortcut
        if isinstance(data, dict) and data.get("schema") == HASH_SCHEMA and isinstance(data.get("files"), dict):
            self.entries = {k: v for k, v in data["files"].items() if isinstance(v, dict)}

    @staticmethod
    def _state(st: os.stat_result) -> dict:
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "inode": st.st_ino}

    def known(self, key: str, st: os.stat_result) -> bool:
        """Does the cache hold the sha256 of `key` in this state (sha256 would read nothing)?"""
        entry = self.entries.get(key)
        return entry is not None and "sha256" in entry and all(entry.get(k) == v for k, v in self._state(st).items())

    def sha256(self, key: str, file: Path, st: os.stat_result) -> str:
        if self.known(key, st):
            return self.entries[key]["sha256"]
        want = self._state(st)
        digest = sha256_file(file)
        self.hashed += 1
        self.entries[key] = {**want, "sha256": digest}
        self._changed = True
        return digest

    def forget(self, key: str) -> None:
        if self.entries.pop(key, None) is not None:
            self._changed = True

    def save(self) -> None:
        if self._changed and self.file is not None:
            try:
                io.write_json(self.file, {"schema": HASH_SCHEMA, "files": self.entries})
            except OSError:
                return  # a full or read-only disk: the cache is only a shortcut; the run's own check says why
            self._changed = False


def _parents(path: str):
    """Path(path).parents as strings ('.' last for a relative path), without making Path objects."""
    while path != ".":
        parent = os.path.dirname(path)
        if parent == path:   # the root
            return
        yield parent or "."
        path = parent or "."


def _wanted(record: Record, paths: set[str]) -> bool:
    """Does the requested DAG use this record's job? (a path may be a directory output)"""
    if norm(record.path) in paths:
        return True
    for entry in record.entries("outputs"):
        out = norm(entry["path"])
        if out in paths or any(parent in paths for parent in _parents(out)):
            return True
    return False


def _made(path: str, outputs: set[str]) -> bool:
    """Is `path` an output of a job of the run, or a file under a directory output?"""
    return path in outputs or any(parent in outputs for parent in _parents(path))


WORKFLOW_FOLDERS = ("results", "models")  # every file under them is a job's output (the smoke and sizing models too)


def _workflow_made(path: str) -> bool:
    """Checked without the run's DAG (`check(workdir)` alone): a recorded input under the workflow's own folders
    was made by a job even when that job's record is gone with it (a killed `--forcerun`), so it is judged."""
    return path.split("/", 1)[0] in WORKFLOW_FOLDERS


def _inside(path: str, root: str) -> str:
    """`path` as the check names it: normalized, and relative to the working directory (`root`, real) where under it."""
    if os.path.isabs(path):
        inside = os.path.relpath(os.path.realpath(path), root)
        path = path if inside == os.pardir or inside.startswith(os.pardir + os.sep) else inside
    return norm(path)


def _file_marks(workdir: str | Path) -> list[str]:
    """The marks of Snakemake's file backend (its default): the names of the files under .snakemake/incomplete/,
    each the output's path, urlsafe base64, cut into pieces no longer than a file name (every piece but the last a
    folder named '@' + piece: Snakemake's persistence.file.FilePersistence._record_path). A name that does not
    decode to a path (Snakemake's own `migration_underway` file) is skipped."""
    import base64
    import binascii

    base = Path(workdir) / INCOMPLETE
    if not base.is_dir():
        return []
    found = []
    for folder, dirs, files in os.walk(base):
        dirs.sort()
        rel = os.path.relpath(folder, base)
        pieces = [] if rel == "." else rel.split(os.sep)
        if any(not piece.startswith("@") for piece in pieces):
            continue  # not one of Snakemake's continuation folders
        for name in sorted(files):
            encoded = "".join(piece[1:] for piece in pieces) + name
            try:
                path = base64.urlsafe_b64decode(encoded.encode("ascii")).decode("utf-8")
            except (binascii.Error, ValueError):
                continue
            if path and "\x00" not in path:
                found.append(path)
    return found


def shown_db_url(db_url) -> str:
    """A --persistence-backend-db-url (text, or SQLAlchemy's URL) as fourloops shows it anywhere (the invocation jobs
    record, a keep stash's manifest, a refusal): its password as ***, and so the value of every query parameter that
    carries one (libpq's ?password= and ?sslpassword=, the MySQL drivers' ?passwd=, an ODBC connect string), which
    SQLAlchemy's own hide_password leaves in. sqlalchemy.exc.ArgumentError for text that is no URL."""
    import re

    from sqlalchemy.engine import make_url

    url = make_url(db_url)
    secret = re.compile(r"pass|pwd|secret|token|odbc_connect", re.IGNORECASE)
    masked = "fourloopsmasked0secret"  # rendered as it is (no character URL-quoted), then shown as ***
    url = url.set(query={key: masked if secret.search(key) else value for key, value in url.query.items()})
    return url.render_as_string(hide_password=True).replace(masked, "***")


def _db_marks(workdir: str | Path, db_url: str | None) -> list[str]:
    """The marks of Snakemake's database backend (`--persistence-backend db`): the rows of its table
    snakemake_metadata with `incomplete` set, in the namespace of this working directory (the absolute path of its
    .snakemake, as DbPersistence names it), read through Snakemake's own table model (persistence.db.MetadataRecordORM).
    Snakemake offers no call listing every incomplete key (DbPersistence._filter_incomplete_keys asks about keys it is
    given, and a job killed before its record leaves outputs no record names), so this is its query without the keys.
    `db_url`: the --persistence-backend-db-url the runs used; None reads Snakemake's default, .snakemake/metadata.db,
    where it exists."""
    workdir = Path(workdir)
    if db_url is None:
        db = workdir / METADATA_DB
        if not db.is_file():
            return []  # the warm path of the file backend: one stat, no import
        db_url = f"sqlite:///{os.path.realpath(db)}"
    from sqlalchemy import create_engine, select
    from sqlalchemy.engine.url import make_url
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError
    from sqlalchemy.orm import Session
    from snakemake.persistence.db import MetadataRecordORM

    allowed = ("allowed: the --persistence-backend-db-url the runs used (an SQLAlchemy URL such as "
               "sqlite:///.snakemake/metadata.db), or none for Snakemake's default .snakemake/metadata.db")
    try:
        url = make_url(db_url)
    except ArgumentError:
        import re

        shown = re.sub(r"(?<=:)[^:@/]*(?=@)", "***", db_url)  # no URL, yet it may hold user:password@
        raise ValueError(f"db_url = {shown!r} is not a database URL; {allowed}") from None
    shown = shown_db_url(url)
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            raise ValueError(f"db_url = {shown!r} names no database file; {allowed}")
        file = url.database if os.path.isabs(url.database) else os.path.join(workdir, url.database)  # as the run saw it
        if not os.path.isfile(file):
            raise FileNotFoundError(f"db_url = {shown!r}: no database file {file}; {allowed}")
        url = url.set(database=os.path.realpath(file))
    namespace = os.path.join(os.path.realpath(workdir), ".snakemake")  # DbPersistence: Path(abspath(".snakemake"))
    engine = create_engine(url)
    try:
        with Session(engine) as session:
            return list(session.scalars(select(MetadataRecordORM.target).where(
                MetadataRecordORM.namespace == namespace, MetadataRecordORM.incomplete.is_(True))))
    except SQLAlchemyError as exc:
        raise RuntimeError(f"cannot read Snakemake's incomplete marks from db_url = {shown!r}: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    finally:
        engine.dispose()


def incomplete_marks(workdir: str | Path, db_url: str | None = None) -> list[str]:
    """The outputs Snakemake marks incomplete in `workdir` (normalized, relative to it where under it, sorted), from
    either of its persistence backends: the file backend's .snakemake/incomplete/ and the database backend's
    (`db_url`, its --persistence-backend-db-url; by default .snakemake/metadata.db where it exists). A mark in
    either is named: which backend the next run uses is its command line's, which the check cannot know."""
    root = os.path.realpath(workdir)
    return sorted({_inside(path, root) for path in (*_file_marks(workdir), *_db_marks(workdir, db_url))})


def _maker(index: records.ProvenanceIndex, by_path: dict[str, Record], path: str) -> Record | None:
    """The record of the job that makes `path`: the record itself, or one that lists it as an output."""
    if path in by_path:
        return by_path[path]
    made_by = index.producers(path)
    return made_by[0][0] if made_by else None


def _depths(index: records.ProvenanceIndex) -> dict[str, tuple[int, str]]:
    """Each record's distance from the sources (upstream jobs first, as a reader follows the run)."""
    depth: dict[str, int] = {}

    def of(record: Record, seen: frozenset) -> int:
        if record.path not in depth:
            ups = [up for e in record.entries("inputs") for up, _ in index.producers(e["path"])
                   if up.path not in seen and up.path != record.path]
            depth[record.path] = 1 + max((of(up, seen | {record.path}) for up in ups), default=-1)
        return depth[record.path]
    return {r.path: (of(r, frozenset()), r.path) for r in index.records}


def check(
    workdir: str | Path,
    paths: Iterable[str] | None = None,
    *,
    use_cache: bool = True,
    cache: HashCache | None = None,
    index: records.ProvenanceIndex | None = None,
    expected: Iterable[Expected] | None = None,
    db_url: str | None = None,
) -> list[Problem]:
    """Every problem of every record under results/provenance (or, given `paths`, of the records
    whose job makes one of those paths: files, directories or record files, relative to `workdir`).

    `use_cache=False` reads every byte again and leaves the cache file alone; `cache` passes one in
    (to count what was read: `cache.hashed`); `index` passes the records already read. `expected`:
    the jobs the run uses; an existing output of one whose record is absent is unverified, and a
    recorded input that one of them makes is judged even when its producer's record is gone. Without
    `expected` (the check run alone), a recorded input under results/ or models/ is judged so, and an existing
    output Snakemake marks incomplete is `incomplete`, once per job (in a run, Snakemake acts on its own marks):
    the marks of either backend (`incomplete_marks`; `db_url`: the --persistence-backend-db-url the runs used, where
    it is not Snakemake's default .snakemake/metadata.db). Marked outputs no record lists are named once per folder:
    the marks do not name their job (a local job's mark holds only `external_jobid`, null).
    """
    workdir = Path(workdir)
    index = index if index is not None else records.index(workdir)
    wanted = None if paths is None else {norm(p) for p in paths}
    if cache is None:
        cache = HashCache(workdir / HASH_CACHE if use_cache else None)
    problems: list[Problem] = []
    standalone = expected is None  # no DAG says which files jobs make: the workflow's own folders do
    expected = list(expected or ())
    made = {norm(p) for job in expected for p in (job.record, *job.outputs)}

    stats: dict[str, list] = {}  # path -> [stat or None, sha256 or None]: each file stat'd and hashed once

    def stat_of(path: str) -> os.stat_result | None:
        if path not in stats:
            try:
                st = os.stat(os.path.join(workdir, path))
            except OSError:
                cache.forget(path)
                st = None
            stats[path] = [st, None]
        return stats[path][0]

    def sha_of(path: str) -> str | None:
        """sha256 of `path` now (stat_of first); None when it is not a file."""
        st = stat_of(path)
        if st is None or not stat.S_ISREG(st.st_mode):
            return None
        if stats[path][1] is None:
            stats[path][1] = cache.sha256(path, Path(workdir, path), st)
        return stats[path][1]

    for unreadable in index.unreadable:
        if wanted is None or norm(unreadable) in wanted:
            problems.append(Problem(unreadable, "unreadable record", "not a JSON object", unreadable,
                                    Path(unreadable).parent.name))
    have = {norm(r.path) for r in index.records} | {norm(p) for p in index.unreadable}
    for job in expected:
        if norm(job.record) in have:
            continue
        present = [p for p in job.outputs if stat_of(norm(p)) is not None]
        if present:
            problems.append(Problem(norm(present[0]), "unverified",
                                    f"its record {job.record} is missing ({len(present)} of {len(job.outputs)} "
                                    "outputs exist)", job.record, job.rule, dict(job.wildcards)))
    if standalone:
        marked: dict[str, list[str]] = {}  # record (or the folder, where no record lists it) -> its marked outputs
        makers: dict[str, Record | None] = {}
        by_path = {norm(r.path): r for r in index.records}
        for path in incomplete_marks(workdir, db_url):
            if stat_of(path) is None:
                continue  # gone: the run makes it because it is missing (its record, if any, says so)
            record = _maker(index, by_path, path)
            if wanted is not None and path not in wanted and not _made(path, wanted) and not (
                    record is not None and _wanted(record, wanted)):
                continue
            key = record.path if record is not None else os.path.dirname(path) or "."
            makers[key] = record
            marked.setdefault(key, []).append(path)
        why = "(its job never finished under Snakemake); the next run makes "
        for key, paths_marked in marked.items():
            record = makers[key]
            paths_marked = sorted(paths_marked, key=lambda p: (p == key, p))  # an output before the record itself
            if record is None:
                # no record: the first marked path names the job to Snakemake (an output of it), once per folder
                detail = ("Snakemake marks it incomplete " + why + "it again; no provenance record lists it"
                          if len(paths_marked) == 1 else
                          f"Snakemake marks {len(paths_marked)} files in {key}/ incomplete " + why + "them again; no "
                          "provenance record lists them, and the marks do not name their job")
                problems.append(Problem(paths_marked[0], "incomplete", detail, paths_marked[0], ""))
                continue
            outputs = {norm(e["path"]) for e in record.entries("outputs")} | {norm(record.path)}
            detail = ("Snakemake marks it incomplete " + why + "it again" if len(paths_marked) == 1 else
                      f"Snakemake marks {len(paths_marked)} of its job's {len(outputs)} outputs incomplete " + why
                      + "them again")
            problems.append(Problem(paths_marked[0], "incomplete", detail, record.path, record.rule,
                                    dict(record.data.get("wildcards") or {})))
    order = _depths(index)
    for record in sorted(index.records, key=lambda r: order[r.path]):
        if wanted is not None and not _wanted(record, wanted):
            continue

        def problem(path: str, kind: str, detail: str = "") -> None:
            problems.append(Problem(path, kind, detail, record.path, record.rule,
                                    dict(record.data.get("wildcards") or {})))
        for entry in record.entries("outputs"):
            path, size, sha = norm(entry["path"]), entry.get("bytes"), entry.get("sha256")
            st = stat_of(path)
            if st is None:
                problem(path, "missing")
                continue
            if isinstance(size, int) and st.st_size != size:
                # a size that differs is enough: no need to read the bytes
                kind = "truncated" if st.st_size < size else "edited"
                problem(path, kind, f"{st.st_size} of {size} bytes" if kind == "truncated"
                        else f"{st.st_size} bytes, recorded {size}")
                continue
            now = sha_of(path)
            if now != sha and index.producer(path, now) is None:
                problem(path, "edited", f"sha256 {str(now)[:12]}, recorded {str(sha)[:12]}")
        for entry in record.entries("inputs"):
            path, sha = norm(entry["path"]), entry.get("sha256")
            if not index.producers(path) and not _made(path, made) and not (standalone and _workflow_made(path)):
                continue         # a file no job made (a source, a user's checkpoint): not ours to judge
            if stat_of(path) is None or (now := sha_of(path)) is None:
                problem(path, "input gone")
            elif now != sha:
                problem(path, "input changed", f"sha256 {now[:12]}, the job read {str(sha)[:12]}")
    cache.save()
    return problems


def describe(problems: list[Problem], *, shown: int = 3) -> str:
    """One line per job to run again, with why (cf. `dvc status`); '' when nothing is wrong."""
    by_record: dict[str, list[Problem]] = {}
    for p in problems:
        by_record.setdefault(p.record, []).append(p)
    lines = []
    for record, found in by_record.items():
        found = sorted(found, key=lambda p: (KINDS.index(p.kind), p.path))
        more = f"; +{len(found) - shown} more" if len(found) > shown else ""
        lines.append(f"{found[0].job} must run again ({record}): "
                     + "; ".join(p.why for p in found[:shown]) + more)
    return "\n".join(lines)
