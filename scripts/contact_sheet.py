from fourloops.jobs import job
from fourloops.stages.sheets import sheet_stage

with job(snakemake) as run:
    run.record(**sheet_stage(
        images=list(snakemake.input.images),
        azimuths=list(snakemake.params.azimuths),
        out=snakemake.output.sheet,
        title=snakemake.params.title,
        model_set=snakemake.params.model_set,
    ))
