from fourloops.jobs import job
from fourloops.stages.sizing import sizing_model_stage

with job(snakemake) as run:
    run.record(**sizing_model_stage(
        component=snakemake.wildcards.component, out_dir=snakemake.output.model, device=snakemake.params.device,
        seed=snakemake.params.seed, texts=snakemake.params.texts, model_set=snakemake.params.model_set,
    ))
