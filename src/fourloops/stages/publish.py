"""The publication gate as a job (desk): scripts/publish.py runs fourloops.gate.run_gate, which publishes
every listed artifact or none. No outputs of its own (it is re-judged every time it is asked for)."""

from __future__ import annotations

from fourloops.stage import Stage

STAGE = Stage(name="publish", rules=("publish",), profile="desk")
