"""The publication gate as a job (desk): scripts/publish.py runs fourloops.gate.run_gate, which publishes
every listed artifact or none. No outputs of its own (it is re-judged every time it is asked for), so no code
whose lineage a job would carry."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from pathlib import Path

from fourloops.stage import Stage



def preview(params: dict, workdir: Path) -> dict:
    """What the gate would judge as the files are now, publishing nothing: the artifacts of publish.artifacts and
    the refusals of rules 1-5, 7 and 8. Rule 6 (would Snakemake rebuild it) is a nested dry-run the gate makes when it
    runs; it is not asked here."""
    from dataclasses import asdict

    from fourloops import gate, provenance

    cfg = params["publish"]
    artifacts, refusals, _ = gate.judge(workdir, cfg["artifacts"], deny_patterns=cfg["deny_name_patterns"],
                                        allow_dirty=cfg["allow_dirty"], code=provenance.code_version(params["repo"]),
                                        stale=dict.fromkeys)  # every existing file "not stale": rule 6 unasked
    return {"artifacts": [{"path": a.path, "kind": a.kind, "exists": (workdir / a.path).is_file()} for a in artifacts],
            "refusals": [asdict(r) for r in refusals]}


STAGE = Stage(name="publish", code=None, rules=("publish",), profile="desk", preview=preview)
