# The azimuth back from 2D keypoints, per source: a condition, the renders (floor), their ground truth (floor_gt).


rule fit:
    input:
        unpack(get_fit_inputs),
    output:
        fit="results/fit/{source}.json",
        provenance="results/provenance/fit/{source}.json",
    log:
        "logs/fit/{source}.log",
    benchmark:
        "benchmarks/fit/{source}.tsv"
    params:
        job=get_fit_params,
        model_set=config["model_set"],
        lineage=get_fit_lineage,
    threads: 1
    resources:
        profile="desk",
        mem_mb=ask_mem_mb,
        vram_mb=ask_vram_mb,
        os=ask_os,
        arch=ask_arch,
        devices=ask_devices,
        licensed=ask_licensed,
    script:
        "../scripts/fit.py"
