# Every configured render restyled per style: one job per style loads the generator once.
from fourloops.rule_functions.restyle import get_restyle_inputs, get_restyle_params


rule restyle:
    input:
        unpack(with_config(get_restyle_inputs)),
    output:
        images=expand("results/restyle/{{style}}/az{az}.png", az=RESTYLE_TAGS),
        manifest="results/restyle/{style}/views.json",
        provenance="results/provenance/restyle/{style}.json",
    log:
        "logs/restyle/{style}.log",
    benchmark:
        "benchmarks/restyle/{style}.tsv"
    params:
        job=with_config(get_restyle_params),
        model_set=config["model_set"],
        lineage=LINEAGE,
        **GENERATOR_WEIGHTS,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/restyle.py"
