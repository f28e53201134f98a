# New views per ladder condition: one job loads the generator once and makes every azimuth.
from fourloops.rule_functions.generate import get_generate_inputs, get_generate_params


rule generate:
    input:
        unpack(with_config(get_generate_inputs)),
    output:
        images=expand("results/generate/{{condition}}/az{az}.png", az=LADDER_TAGS),
        manifest="results/generate/{condition}/views.json",
        provenance="results/provenance/generate/{condition}.json",
    log:
        "logs/generate/{condition}.log",
    benchmark:
        "benchmarks/generate/{condition}.tsv"
    params:
        job=with_config(get_generate_params),
        model_set=config["model_set"],
        lineage=LINEAGE,
        **GENERATOR_WEIGHTS,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/generate.py"
