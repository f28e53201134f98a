from fourloops.batching import resolved
from fourloops.jobs import job
from fourloops.stages.generate import generate_stage

# Only a `lora: true` condition has the input `lora` (the camera LoRA file); no other job names it.
lora = getattr(snakemake.input, "lora", None)

with job(snakemake) as run:
    run.record(**generate_stage(
        references=list(snakemake.input.references),
        images_out=list(snakemake.output.images),
        manifest_out=snakemake.output.manifest,
        machine=snakemake.config["machine"],
        lora_path=None if lora is None else str(lora),
        batch=resolved(snakemake.resources),
        **snakemake.params.job,
    ))
