# The azimuth back from 2D keypoints, per source: a condition, the renders (floor), their ground truth (floor_gt).
from fourloops.rule_functions.fit import get_fit_inputs, get_fit_params


rule fit:
    input:
        unpack(with_config(get_fit_inputs)),
    output:
        fit="results/fit/{source}.json",
        provenance="results/provenance/fit/{source}.json",
    log:
        "logs/fit/{source}.log",
    benchmark:
        "benchmarks/fit/{source}.tsv"
    params:
        job=with_config(get_fit_params),
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/fit.py"
