from fourloops.jobs import job
from fourloops.stages import render_stage

with job(snakemake) as run:
    run.record(**render_stage(
        skeleton=snakemake.input.skeleton,
        image_out=snakemake.output.image,
        keypoints_out=snakemake.output.keypoints,
        azimuth=snakemake.params.azimuth,
        body=snakemake.params.body,
        camera=snakemake.params.camera,
        background=snakemake.params.background,
    ))
