from fourloops.jobs import job
from fourloops.stages.hef_baseline import table_stage

with job(snakemake) as run:
    run.record(**table_stage(device=snakemake.input.device, cpu=snakemake.input.cpu, out=snakemake.output.table))
