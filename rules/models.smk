# The smoke model set: tiny models built from configs with fixed seeds, no download.
# They are saved the way real weights are (save_pretrained / rfdetr checkpoints) and loaded through
# the same code path. Only the smoke model set asks for them.


rule smoke_generator:
    output:
        model=directory(SMOKE_GENERATOR_DIR),
        provenance="results/provenance/smoke_generator/{backend}.json",
    log:
        "logs/smoke_generator/{backend}.log",
    benchmark:
        "benchmarks/smoke_generator/{backend}.tsv"
    params:
        seed=config["smoke"]["seed"],
        model_set="smoke",
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/smoke_generator.py"


rule smoke_detector:
    output:
        weights=SMOKE_DETECTOR,
        provenance="results/provenance/smoke_detector/rfdetr-keypoint.json",
    log:
        "logs/smoke_detector/rfdetr-keypoint.log",
    benchmark:
        "benchmarks/smoke_detector/rfdetr-keypoint.tsv"
    params:
        seed=config["smoke"]["seed"],
        resolution=config["smoke"]["keypoints_resolution"],
        model_set="smoke",
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/smoke_detector.py"


rule smoke_scorer:
    output:
        model=directory(SMOKE_SCORER_DIR),
        provenance="results/provenance/smoke_scorer/qwen3-vl.json",
    log:
        "logs/smoke_scorer/qwen3-vl.log",
    benchmark:
        "benchmarks/smoke_scorer/qwen3-vl.tsv"
    params:
        seed=config["smoke"]["seed"],
        model_set="smoke",
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/smoke_scorer.py"
