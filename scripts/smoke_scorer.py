from fourloops.jobs import job
from fourloops.stages.smoke_scorer import smoke_scorer_stage

with job(snakemake) as run:
    run.record(**smoke_scorer_stage(out_dir=snakemake.output.model, seed=snakemake.params.seed))
