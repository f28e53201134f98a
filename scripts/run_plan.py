from fourloops.jobs import job
from fourloops.stages.report import run_plan_stage

with job(snakemake) as run:
    run.record(**run_plan_stage(
        plan=dict(snakemake.params.plan), out=snakemake.output.page, model_set=snakemake.params.model_set
    ))
