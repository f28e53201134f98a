from fourloops.jobs import job
from fourloops.stages.ladder import ladder_stage

with job(snakemake) as run:
    run.record(**ladder_stage(
        fits=list(snakemake.input.fits),
        manifests=list(snakemake.input.manifests),
        csv_out=snakemake.output.table,
        png_out=snakemake.output.plot,
        model_set=snakemake.params.model_set,
    ))
