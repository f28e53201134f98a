from fourloops.jobs import job
from fourloops.stages.drift import drift_stage

with job(snakemake) as run:
    run.record(**drift_stage(
        render_points=list(snakemake.input.render),
        restyled_points=list(snakemake.input.restyled),
        azimuths=snakemake.params.azimuths,
        style=snakemake.params.style,
        drift=snakemake.params.drift,
        csv_out=snakemake.output.table,
        regions_out=snakemake.output.regions,
        png_out=snakemake.output.png,
        model_set=snakemake.params.model_set,
    ))
