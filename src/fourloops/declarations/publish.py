"""The publication gate as a job (desk): scripts/publish.py runs fourloops.gate.run_gate, which publishes
every listed artifact or none. No outputs of its own (it is re-judged every time it is asked for), so no code
whose lineage a job would carry."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops.stage import Stage

STAGE = Stage(name="publish", code=None, rules=("publish",), profile="desk")
