from fourloops.jobs import job
from fourloops.stages import skeleton_stage

with job(snakemake) as run:
    run.record(**skeleton_stage(body=snakemake.params.body, out=snakemake.output.skeleton))
