"""A job that resumes from checkpoints (its `checkpoint_dir` param: the LoRA's) resumes only from those its own
lineage wrote: the training's fingerprint holds its config and inputs, not the code, so a checkpoint left by a
killed run of other code would be continued under the new lineage, half one and half the other. The lineage each
pending job that checkpoints on this filesystem runs under is kept in LINEAGE_TABLE; another lineage's
checkpoints, or ones no run of this workflow recorded, are removed before the job, saying so.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import os
import shutil
import sys
from pathlib import Path

from fourloops.io import read_json, write_json

LINEAGE_TABLE = ".snakemake/fourloops-checkpoints.json"  # checkpoint folder -> the lineage of the job writing it


def retire(dag, profile, on_pod) -> None:
    """Before the first job: the checkpoints of each pending job of `dag` (Snakemake's) that another lineage wrote
    are removed. `profile(rule, wildcards)` is a job's profile tag; the jobs of a tag in `on_pod` run on a pod, whose
    checkpoints stay on the pod."""
    table_path = Path(LINEAGE_TABLE)
    table = read_json(table_path) if table_path.is_file() else {}
    changed = False
    for job in dag.needrun_jobs():  # here, or on a SLURM node, which resumes from the shared filesystem
        if not job.rule.output or profile(job.rule.name, dict(job.wildcards.items())) in on_pod:
            continue
        params = dict(job.params.items())
        where, lineage = params.get("checkpoint_dir"), params.get("lineage")
        if not where or not lineage:
            continue
        where = os.path.normpath(str(where))
        if Path(where).is_dir() and any(Path(where).iterdir()) and table.get(where) != lineage:
            said = ("another lineage (its code, config or inputs since changed)" if where in table else
                    "a run that recorded no lineage")
            print(f"fourloops: removing the checkpoints in {where}, written under {said}: rule {job.rule.name} "
                  "trains from its first step", file=sys.stderr)
            shutil.rmtree(where)
        if table.get(where) != lineage:
            table[where] = lineage
            changed = True
    if changed:
        write_json(table_path, table)
