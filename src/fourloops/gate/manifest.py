"""MANIFEST.json: a lock-file-like record (cf. dvc.lock) of what was published and what made it."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from fourloops.gate.lineage import Lineage
from fourloops.gate.listing import Artifact
from fourloops.gate.precision import record_precisions
from fourloops.records import Record

MANIFEST = "MANIFEST.json"


def _models(lin: Lineage) -> list[dict]:
    out, seen = [], set()
    for rec in lin.records:
        for m in rec.data.get("models") or []:
            if not isinstance(m, dict):
                continue
            item = {k: m.get(k) for k in ("model", "revision", "precision", "backend") if m.get(k) is not None}
            key = json.dumps(item, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append({**item, "used_by": rec.label})
    return out


def build_manifest(
    artifacts: list[Artifact],
    found: dict[str, tuple[Record, Lineage, dict]],
    *,
    code: dict | None,
    allow_dirty: bool,
    invocation: str = "",
    now: dt.datetime | None = None,
) -> dict:
    """A lock-file-like manifest (cf. dvc.lock): per artifact what it is and everything that made it."""
    now = now or dt.datetime.now(dt.timezone.utc)
    entries = {}
    for art in artifacts:
        producer, lin, entry = found[art.path]
        data = producer.data
        lineage_precisions = sorted({p for r in lin.records for p in record_precisions(r.data)})
        entries[art.name] = {
            "path": art.path,
            "sha256": entry["sha256"],
            "size": entry["bytes"],
            "kind": art.kind,
            "precision": data.get("precision"),
            "lineage_precisions": lineage_precisions,
            "allowed_precisions": list(art.allow_precisions),
            "rule": data.get("rule"),
            "wildcards": data.get("wildcards"),
            "params": data.get("params"),
            "code": data.get("code"),
            "model_set": data.get("model_set"),
            "models": _models(lin),
            "seed": data.get("seed"),
            "machine": data.get("machine"),
            "gpu": data.get("gpu"),
            "started": data.get("started"),
            "wall_seconds": data.get("wall_seconds"),
            "peak_vram_gib": data.get("peak_vram_gib"),
            "inputs": [{"path": i.get("path"), "sha256": i.get("sha256"), "size": i.get("bytes")}
                       for i in data.get("inputs") or []],
            "provenance": {
                "record": producer.path,
                "published_copy": str(Path("provenance") / Path(producer.path).relative_to(
                    "results/provenance")) if producer.path.startswith("results/provenance/") else None,
                "lineage": [r.path for r in lin.records],
            },
        }
    dirty = code is None or code.get("commit") is None or bool(code.get("dirty")) or any(
        (r.data.get("code") or {}).get("dirty") is not False for _, lin, _ in found.values() for r in lin.records
    )
    return {
        "schema": "fourloops.manifest/1",
        "published": now.isoformat(timespec="seconds"),
        "code": {"commit": (code or {}).get("commit"), "dirty": dirty, "allow_dirty": allow_dirty},
        "invocation": invocation,
        "artifacts": entries,
    }
