"""bench/dryrun.py's bare jobs: touch every output and log (Snakemake `script:`, as fourloops' rules are)."""

from pathlib import Path

for path in [*snakemake.output, *snakemake.log]:  # noqa: F821 - Snakemake's script global
    Path(path).touch()
