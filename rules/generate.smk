# New views per ladder condition: one job loads the generator once and makes every azimuth.


rule generate:
    input:
        unpack(get_generate_inputs),
    output:
        images=expand("results/generate/{{condition}}/az{az}.png", az=LADDER_TAGS),
        manifest="results/generate/{condition}/views.json",
        provenance="results/provenance/generate/{condition}.json",
    log:
        "logs/generate/{condition}.log",
    benchmark:
        "benchmarks/generate/{condition}.tsv"
    params:
        job=get_generate_params,
        model_set=config["model_set"],
        lineage=get_generate_lineage,
        busy_card_limit_gib=get_busy_card_limit_gib,
    threads: 1
    resources:
        profile="pod",
        mem_mb=ask_mem_mb,
        vram_mb=ask_vram_mb,
        os=ask_os,
        arch=ask_arch,
        devices=ask_devices,
        licensed=ask_licensed,
    script:
        "../scripts/generate.py"
