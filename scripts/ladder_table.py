from fourloops.jobs import job
from fourloops.stages.report import ladder_table_stage

with job(snakemake) as run:
    run.record(**ladder_table_stage(
        table=snakemake.input.table, out=snakemake.output.page, model_set=snakemake.params.model_set
    ))
