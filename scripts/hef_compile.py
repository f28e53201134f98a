import sys

from fourloops.jobs import job
from fourloops.stages.hef_compile import compile_stage

with job(snakemake) as run:
    run.record(**compile_stage(
        onnx=snakemake.input.onnx,
        allowlist=snakemake.input.allowlist,
        calib=snakemake.input.frames,
        hef_out=snakemake.output.hef,
        har_out=snakemake.output.har,
        hef=snakemake.params.hef,
        log=sys.stderr,
    ))
