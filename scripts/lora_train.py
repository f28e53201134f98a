from fourloops.batching import resolved
from fourloops.jobs import job
from fourloops.stages.lora_train import checkpoint_every_of, lora_train_stage

with job(snakemake) as run:
    run.record(**lora_train_stage(
        records=snakemake.input.records,
        embeddings=snakemake.input.embeddings,
        lora_out=snakemake.output.lora,
        loss_csv=snakemake.output.loss,
        loss_png=snakemake.output.curve,
        checkpoint_dir=snakemake.params.checkpoint_dir,
        train=dict(snakemake.params.train),
        checkpoint_every=checkpoint_every_of(snakemake.config),
        machine=snakemake.config["machine"],
        micro_batch=resolved(snakemake.resources),
    ))
