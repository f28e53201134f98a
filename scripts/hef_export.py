from fourloops.jobs import job
from fourloops.stages.hef_export import export_stage

with job(snakemake) as run:
    run.record(**export_stage(
        onnx_out=snakemake.output.onnx,
        record_out=snakemake.output.record,
        detector=snakemake.params.detector,
        hef=snakemake.params.hef,
    ))
