"""The provenance records (results/provenance/<rule>/<job>.json): the one reader and index.

Every job writes one record (fourloops.provenance.build_record). The publication gate follows them
to an artifact's lineage, the wall check reads the peaks they measured, and the output check before
a run compares the files on disk with the sha256 they hold. All three read records through `index`.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

ROOT = "results/provenance"


def norm(path: str) -> str:
    return os.path.normpath(str(path))


@dataclass
class Record:
    path: str      # the record file, relative to the working directory
    data: dict

    @property
    def label(self) -> str:
        wc = self.data.get("wildcards") or {}
        tag = ",".join(f"{k}={v}" for k, v in sorted(wc.items()))
        return f"{self.data.get('rule', '?')}" + (f"[{tag}]" if tag else "")

    @property
    def rule(self) -> str:
        return str(self.data.get("rule", ""))

    @property
    def params(self) -> dict:
        params = self.data.get("params")
        return params if isinstance(params, dict) else {}

    def entries(self, kind: str) -> list[dict]:
        """The record's `inputs` or `outputs`: dicts with path, sha256, bytes."""
        return [e for e in self.data.get(kind) or [] if isinstance(e, dict) and "path" in e]


@dataclass
class ProvenanceIndex:
    records: list[Record] = field(default_factory=list)
    by_output: dict[str, list[tuple[Record, dict]]] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)

    def producers(self, path: str) -> list[tuple[Record, dict]]:
        return self.by_output.get(norm(path), [])

    def producer(self, path: str, sha256: str) -> Record | None:
        for record, entry in self.producers(path):
            if entry.get("sha256") == sha256:
                return record
        return None


def index(workdir: str | Path, root: str = ROOT) -> ProvenanceIndex:
    """Read every record under `root` once; index them by the paths they list as outputs."""
    workdir = Path(workdir)
    out = ProvenanceIndex()
    base = workdir / root
    if not base.is_dir():
        return out
    for file in sorted(base.rglob("*.json")):
        rel = os.path.relpath(file, workdir)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            out.unreadable.append(rel)
            continue
        if not isinstance(data, dict):
            out.unreadable.append(rel)
            continue
        record = Record(rel, data)
        out.records.append(record)
        for entry in record.entries("outputs"):
            out.by_output.setdefault(norm(entry["path"]), []).append((record, entry))
    return out


def benchmark_seconds(path: str | None) -> float | None:
    """Mean wall seconds of a job's Snakemake benchmark file, when it ran before."""
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path, newline="") as fh:
            rows = [float(r["s"]) for r in csv.DictReader(fh, delimiter="\t") if r.get("s")]
    except (OSError, ValueError, KeyError):
        return None
    return sum(rows) / len(rows) if rows else None
