from fourloops.batching import resolved
from fourloops.jobs import job
from fourloops.stages.restyle import restyle_stage

with job(snakemake) as run:
    run.record(**restyle_stage(
        references=list(snakemake.input.references),
        images_out=list(snakemake.output.images),
        manifest_out=snakemake.output.manifest,
        machine=snakemake.config["machine"],
        batch=resolved(snakemake.resources),
        **snakemake.params.job,
    ))
