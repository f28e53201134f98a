from fourloops.jobs import job
from fourloops.stages.compare import compare_stage

with job(snakemake) as run:
    run.record(**compare_stage(
        table=snakemake.output.table,
        page=snakemake.output.page,
        model_set=snakemake.params.model_set,
        **snakemake.params.job,
    ))
