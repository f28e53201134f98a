from fourloops.jobs import job
from fourloops.stages.hef_export import allowlist_stage

with job(snakemake) as run:
    run.record(**allowlist_stage(
        export_record=snakemake.input.record,
        onnx=snakemake.input.onnx,
        out=snakemake.output.allowlist,
        hef=snakemake.params.hef,
    ))
