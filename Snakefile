# fourloops: render -> generate -> keypoints -> fit -> ladder table. Table of contents only.
from snakemake.utils import min_version, validate

min_version("9.27")


# Snakemake's message for a malformed config file names neither file nor line: name both first.
from snakemake.exceptions import WorkflowError
from fourloops.yamlcheck import load_problem

_config_problem = load_problem(os.path.join(workflow.basedir, "config", "config.yaml"))
if _config_problem:
    raise WorkflowError(f"invalid config (nothing was run or written):\n  {_config_problem}")


configfile: os.path.join(workflow.basedir, "config", "config.yaml")


include: "rules/common.smk"
include: "rules/models.smk"
include: "rules/render.smk"
include: "rules/generate.smk"
include: "rules/keypoints.smk"
include: "rules/fit.smk"
include: "rules/ladder.smk"
include: "rules/publish.smk"
include: "rules/probe.smk"


rule all:
    default_target: True
    input:
        "results/ladder.csv",
        "results/ladder.png",
