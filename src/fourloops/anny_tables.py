"""Anny's own tables (phenotype keys and ranges, pose bones) as data, so the config check at parse
time needs no anny or torch import (importing anny costs ~6 s; a dry-run ~2.5 s).

`anny_tables.json` is generated from the installed anny by `python -m fourloops.anny_tables`;
tests regenerate it and compare, so it cannot drift from anny.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import sys
import tempfile
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("anny_tables.json")


@functools.cache
def load(path: str | Path = TABLE_PATH) -> dict:
    """{"anny_version", "phenotype": {key: {"min", "max", "anny_anchors"}}, "bones": [...]}."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def generate() -> dict:
    """The tables from the installed anny (builds the model from its cache, as fourloops.body does).

    A phenotype's allowed range is Anny's interpolation anchors' span cut to the range
    fourloops.body.build_body accepts, so a value the config check passes is one the render takes.
    """
    import torch
    from anny.models.phenotype import make_phenotype_anchors

    from fourloops import body

    model, _, _ = body._model()
    anchors = make_phenotype_anchors(torch.float64)
    lo_body, hi_body = body.PHENOTYPE_RANGE
    phenotype = {}
    for label in model.phenotype_labels:
        lo, hi = round(float(anchors[label].min()), 12), round(float(anchors[label].max()), 12)
        phenotype[label] = {"min": max(lo, lo_body), "max": min(hi, hi_body), "anny_anchors": [lo, hi]}
    return {
        "anny_version": importlib.metadata.version("anny"),
        "phenotype": phenotype,
        "bones": [str(b) for b in model.bone_labels],
    }


def write(path: str | Path = TABLE_PATH) -> Path:
    """Regenerate the table file (atomically: a temporary file renamed over it)."""
    path = Path(path)
    text = json.dumps(generate(), indent=1) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


if __name__ == "__main__":
    print(write(sys.argv[1] if len(sys.argv) > 1 else TABLE_PATH))
