from fourloops.jobs import job
from fourloops.stages.fit import fit_stage

with job(snakemake) as run:
    run.record(**fit_stage(
        points=list(snakemake.input.points),
        skeleton=snakemake.input.skeleton,
        out=snakemake.output.fit,
        **snakemake.params.job,
    ))
