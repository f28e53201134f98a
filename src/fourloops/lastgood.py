"""The last good outputs of the stages that keep them (fourloops.keep), wired to Snakemake's records of them: before
the first job the outputs of each pending job whose stage keeps them are stashed with Snakemake's record of each (a
file of .snakemake/metadata, or a row of its table under `--persistence-backend db`); after the run a job that failed
gets them back; a stash left by a Snakemake that was killed is settled at the next parse.

Snakemake's workflow object is read for its persistence (where it keeps each output's record) alone.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import sys
from pathlib import Path

from fourloops import keep


class LastGood:
    """The last good outputs of `workflow`'s jobs, stashed under the working directory (fourloops.keep)."""

    def __init__(self, workflow):
        self.wf = workflow

    def _keep_files(self, job):
        outputs = [str(f) for f in job.output]
        p = self.wf.persistence
        if not hasattr(p, "_record_path"):  # the database backend: each output's record is a row of its table
            return keep.JobFiles(outputs, rows=[DatabaseRecords(p).key(f) for f in job.output])
        return keep.JobFiles(
            outputs,
            records=[p._record_path(p._metadata_path, f) for f in outputs],
            markers=[p._record_path(p._incomplete_path, f) for f in outputs],
        )

    def stash(self, jobs) -> None:
        """Hard-link the outputs of `jobs` (pending jobs whose stage keeps its last good outputs: money was spent)."""
        keep.stash(Path.cwd(), [self._keep_files(j) for j in jobs], rows=self._database_records())

    def settle(self) -> None:
        """After the run: a job that failed gets its previous outputs back; the stash is dropped."""
        for path in keep.settle(Path.cwd(), self._database_records()):
            print(f"fourloops: kept the last good {path} (its new generation failed)", file=sys.stderr)

    def recover(self) -> None:
        """A stash left by a Snakemake that was killed is settled at the workflow's parse, before its provenance
        records are read and before the DAG is built (by the Snakemake the user started: the caller's to say)."""
        if keep.stash_dir(Path.cwd()).exists():
            keep.recover(Path.cwd(), self._database_records())

    def _database_records(self) -> "DatabaseRecords | None":
        """Where this run keeps Snakemake's records when it keeps them in a database (`--persistence-backend db`);
        at the parse (a killed run's stash) its persistence is not made yet: one is opened as Snakemake opens it."""
        p = self.wf.persistence
        if p is None:
            settings = self.wf.workflow_settings
            if settings.persistence_backend.name == "FILE":
                return None
            from snakemake.persistence.db import DbPersistence

            p = DbPersistence(nolock=True, db_url=settings.persistence_backend_db_url)
        return None if hasattr(p, "_record_path") else DatabaseRecords(p)


class DatabaseRecords:
    """Snakemake's record of each output under `--persistence-backend db`, a row of its table keyed by (the working
    directory's .snakemake, the output path), read and put back for fourloops.keep (its `Rows`) through the
    persistence object's own record API. That API is private to the pinned Snakemake (9.27.1:
    DbPersistence._get_key, _read_record, _write_record, _delete_record); this class is the one place using it."""

    def __init__(self, persistence):
        self.persistence = persistence
        # the database without its password (a URL may carry one), and the namespace of this working directory
        from fourloops.verify import shown_db_url

        self.where = f"{shown_db_url(persistence.engine.url)} (namespace {persistence.namespace})"

    def key(self, output) -> str:
        return self.persistence._get_key(output)

    def read(self, key: str) -> dict | None:
        row = self.persistence._read_record(key)
        return None if row is None else row.model_dump(mode="json")

    def write(self, key: str, row: dict | None) -> None:
        from snakemake.persistence import MetadataRecord

        if row is None:
            self.persistence._delete_record(key)
        else:
            self.persistence._write_record(key, MetadataRecord.model_validate(row))
