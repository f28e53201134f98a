from fourloops.batching import resolved
from fourloops.jobs import job
from fourloops.stages.grades import grades_stage

with job(snakemake) as run:
    run.record(**grades_stage(
        renders=list(snakemake.input.renders),
        restyled=list(snakemake.input.restyled),
        manifest=snakemake.input.manifest,
        csv_out=snakemake.output.table,
        summary_out=snakemake.output.summary,
        machine=snakemake.config["machine"],
        batch=resolved(snakemake.resources),
        **snakemake.params.job,
    ))
