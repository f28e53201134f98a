from fourloops.jobs import job
from fourloops.stages.render import render_stage

with job(snakemake) as run:
    run.record(**render_stage(
        skeleton_out=snakemake.output.skeleton,
        images_out=list(snakemake.output.images),
        keypoints_out=list(snakemake.output.keypoints),
        azimuths=snakemake.params.azimuths,
        body=snakemake.params.body,
        camera=snakemake.params.camera,
        background=snakemake.params.background,
    ))
