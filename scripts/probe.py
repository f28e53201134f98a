from fourloops.batching import resolved
from fourloops.jobs import job
from fourloops.stages.probe import probe_stage

with job(snakemake) as run:
    run.record(**probe_stage(
        out=snakemake.output.record,
        machine_name=snakemake.wildcards.machine,
        component=snakemake.wildcards.component,
        settings=snakemake.params.settings,
        model_set=snakemake.params.model_set,
        machine=snakemake.wildcards.machine,
        batch=resolved(snakemake.resources),
    ))
