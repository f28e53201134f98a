from fourloops.jobs import job
from fourloops.stages.hef_export import calib_stage

with job(snakemake) as run:
    run.record(**calib_stage(
        images=list(snakemake.input.images),
        out=snakemake.output.frames,
        export_record=snakemake.input.record,
        hef=snakemake.params.hef,
    ))
