"""fourloops.jobgraph: the jobs that make a file are the ones Snakemake itself finds, so a job's lineage follows the
same edges as Snakemake's DAG (the whole-DAG identity of every job: bench/job_identity.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO, snakemake_env

# One parse of the workflow by Snakemake's API, then, for every file the requested DAG reads or writes (and a few
# that no rule makes): the graph's producers beside Snakemake's own lookup (its OutputIndex, then Rule.get_wildcards
# as the DAG applies them), as JSON on the last line.
_PRODUCERS = '''
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.output_index import OutputIndex
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
from fourloops.smk import workflow_of
repo, workdir = sys.argv[1:3]
with SnakemakeApi(OutputSettings()) as api:
    wf = api.workflow(resource_settings=ResourceSettings(), config_settings=ConfigSettings(config={"model_set": "smoke"}),
                      snakefile=Path(repo) / "Snakefile", workdir=Path(workdir))._workflow
    graph = workflow_of(wf).jobs
    paths = sorted(graph.requested_paths(["all", "probe", "report_contents", "results/drift/watercolor.csv",
                                          "results/grades/watercolor.csv", "results/hef/rfdetr-keypoint.run2.json"]))
    paths += ["results/render/az017.png", "results/generate/Z/az000.png", "config/config.yaml", "results/x/"]
    index = OutputIndex([r for r in wf.rules if r.output])
    differ = []
    for path in paths:
        theirs = sorted((r.name, dict(r.get_wildcards(path))) for r in index.match_producers(path))
        if graph.producers(path) != theirs:
            differ.append([path, graph.producers(path), theirs])
    print(json.dumps({"paths": len(paths), "made": sum(bool(graph.producers(p)) for p in paths), "differ": differ}))
'''


def test_the_jobs_that_make_a_file_are_the_ones_snakemake_finds(tmp_path):
    proc = subprocess.run([sys.executable, "-c", _PRODUCERS, str(REPO), str(tmp_path)], capture_output=True, text=True,
                          env=snakemake_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["differ"] == [], found["differ"][:5]
    assert found["paths"] > 150 and found["made"] > 150, found  # the whole DAG, not a handful of files
