from fourloops.jobs import job
from fourloops.stages.hef_latency import run2_stage

with job(snakemake) as run:
    run.record(**run2_stage(
        hef_path=snakemake.input.hef,
        export_record=snakemake.input.record,
        out=snakemake.output.record,
        hef=snakemake.params.hef,
    ))
