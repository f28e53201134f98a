"""fourloops: the GPU research loop as a reproducible Snakemake workflow."""

__version__ = "0.1.0"
