"""The sheets stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.sheets is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops.stage import Stage


STAGE = Stage(name="sheets", code="fourloops.stages.sheets",
              rules=("render_sheet", "generated_sheet"), profile="desk")
