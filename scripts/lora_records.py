from fourloops.jobs import job
from fourloops.stages.lora_records import lora_records_stage

with job(snakemake) as run:
    run.record(**lora_records_stage(
        images_out=list(snakemake.output.images),
        records_out=snakemake.output.records,
        **snakemake.params.job,
    ))
