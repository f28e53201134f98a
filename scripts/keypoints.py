from fourloops.batching import resolved
from fourloops.jobs import job
from fourloops.stages.keypoints import keypoints_stage

with job(snakemake) as run:
    run.record(**keypoints_stage(
        images=list(snakemake.input.images),
        points_out=list(snakemake.output.points),
        azimuths=snakemake.params.azimuths,
        detector=snakemake.params.detector,
        machine=snakemake.config["machine"],
        batch=resolved(snakemake.resources),
    ))
