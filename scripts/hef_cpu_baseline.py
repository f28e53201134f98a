from fourloops.jobs import job
from fourloops.stages.hef_baseline import baseline_stage

with job(snakemake) as run:
    run.record(**baseline_stage(
        out=snakemake.output.record,
        detector=snakemake.params.detector,
        runs=snakemake.params.runs,
        threads=snakemake.params.cpu_threads,
    ))
