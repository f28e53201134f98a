from fourloops.jobs import job
from fourloops.stages.lora_embeddings import lora_embeddings_stage

with job(snakemake) as run:
    job_params = dict(snakemake.params.job)
    job_params.pop("records", None)  # the count, for the ask; the records come from the input
    run.record(**lora_embeddings_stage(
        records=snakemake.input.records,
        embeddings_out=snakemake.output.embeddings,
        machine=snakemake.config["machine"],
        **job_params,
    ))
