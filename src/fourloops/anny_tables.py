"""Anny's own tables (phenotype keys and ranges, pose bones) as data, so the config check at parse
time needs no anny or torch import (importing anny costs ~6 s; a dry-run ~2.5 s).

`anny_tables.json` is generated from the installed anny by `python -m fourloops.body` (the domain writes
it; this check only reads it); tests regenerate it and compare, so it cannot drift from anny.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("anny_tables.json")


@functools.cache
def load(path: str | Path = TABLE_PATH) -> dict:
    """{"anny_version", "phenotype": {key: {"min", "max", "anny_anchors"}}, "bones": [...]}."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
