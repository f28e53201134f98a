# fourloops: render -> generate -> keypoints -> fit -> ladder table. Table of contents only.
# Every stage file in rules/ is included (adding a stage adds its file, nothing here); common.smk first.
from snakemake.utils import min_version, validate

min_version("9.27")


report: "report/workflow.rst"


include: "rules/common.smk"


for stage_rules in sorted(Path(workflow.basedir, "rules").glob("*.smk")):
    if stage_rules.name != "common.smk":

        include: stage_rules


# publish.artifacts that no rule makes are named now, with their key, not by the gate's job (every rule is known here)
if _unmade := FOURLOOPS.unmade_artifacts(config["publish"]):
    raise WorkflowError("invalid config (nothing was run or written):\n  " + "\n  ".join(_unmade))


rule all:
    default_target: True
    input:
        "results/ladder.csv",
        "results/ladder.png",
