from fourloops.jobs import job
from fourloops.stages.smoke_models import smoke_detector_stage

with job(snakemake) as run:
    run.record(**smoke_detector_stage(
        out_path=snakemake.output.weights, seed=snakemake.params.seed, resolution=snakemake.params.resolution
    ))
