# The publication gate (RFD 1163): every artifact listed under publish.artifacts is published to
# results/published/ with MANIFEST.json, or none is and one table says why.
# No output and no input on purpose: a rule without files always runs when asked for (the gate is
# re-judged every time), Snakemake never deletes results/published/ before the job (it is not a
# declared output), and `snakemake publish` never builds: a stale artifact is refused, not rebuilt
# (rule 6 asks Snakemake itself, with a --nolock dry-run summary; see fourloops.gate). No benchmark:
# a benchmark file is a product, and an existing one would make the gate "up to date".


rule publish:
    log:
        "logs/publish/publish.log",
    params:
        publish=config["publish"],
        snakefile=workflow.main_snakefile,
        repo=workflow.basedir,
    localrule: True
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/publish.py"
