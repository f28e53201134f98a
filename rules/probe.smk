# Measured beats estimated: one load per configured model on the machine this runs on, then timed passes per
# configuration (the generator per reference count); its peak VRAM, load and per-item seconds replace the
# models.yaml estimate in later wall checks (fourloops.asks.Measurements).
#   snakemake probe --config machine=desk
#   snakemake --workflow-profile profiles/sizing probe      (the sizing set: real shapes, random weights, built first)
from fourloops.rule_functions.probe import get_probe_inputs, get_probe_settings


rule probe:
    input:
        expand("results/probe/{machine}/{component}.json", machine=config["machine"], component=probed_components()),


rule probe_model:
    input:
        unpack(with_config(get_probe_inputs)),
    output:
        record="results/probe/{machine}/{component}.json",
        provenance="results/provenance/probe/{machine}-{component}.json",
    log:
        "logs/probe/{machine}/{component}.log",
    benchmark:
        "benchmarks/probe/{machine}/{component}.tsv"
    wildcard_constraints:
        component="|".join(probed_components()),
        machine="|".join(FOURLOOPS.machine_names()),
    params:
        component=lambda wildcards: wildcards.component,
        # its GPU declaration's settings (fourloops.stage.Gpu): the one component this job loads
        settings=with_config(get_probe_settings),
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/probe.py"
