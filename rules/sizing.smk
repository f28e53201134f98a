# The sizing model set: the configured real models at their real shapes with random weights, built from the
# architecture descriptions in config/architectures/ (numbers, not weights) and saved with save_pretrained, so
# the real loaders measure memory and time on a real GPU with nothing downloaded. Only model_set sizing asks
# for them (profiles/sizing).


rule sizing_model:
    output:
        model=directory("models/sizing/{component}"),
        provenance="results/provenance/sizing_model/{component}.json",
    log:
        "logs/sizing_model/{component}.log",
    benchmark:
        "benchmarks/sizing_model/{component}.tsv"
    wildcard_constraints:
        component="|".join(sizing_builds()),  # the GPU declarations' builds
    params:
        device=config["sizing"]["build_device"],
        seed=config["sizing"]["seed"],
        # the tokenizer's corpus: the run's own prompts (lambda: "{azimuth}" is not a wildcard)
        texts=lambda wildcards: sizing_corpus(config),
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/sizing_model.py"
