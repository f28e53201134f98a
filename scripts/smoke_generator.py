from fourloops.jobs import job
from fourloops.stages.smoke_models import smoke_generator_stage

with job(snakemake) as run:
    run.record(**smoke_generator_stage(
        backend=snakemake.wildcards.backend, out_dir=snakemake.output.model, seed=snakemake.params.seed
    ))
