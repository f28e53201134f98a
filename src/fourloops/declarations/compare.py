"""The compare stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.compare is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops.stage import Stage


STAGE = Stage(name="compare", code="fourloops.stages.compare", rules=("compare",), profile="desk")
