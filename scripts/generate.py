from fourloops.jobs import job
from fourloops.stages import generate_stage

with job(snakemake) as run:
    run.record(**generate_stage(
        references=list(snakemake.input.references),
        images_out=list(snakemake.output.images),
        manifest_out=snakemake.output.manifest,
        busy_card_limit_gib=snakemake.params.busy_card_limit_gib,
        **snakemake.params.job,
    ))
