# RF-DETR keypoints (COCO-17) on every render and every generated view; one model load per set.
from fourloops.rule_functions.keypoints import get_keypoint_inputs


rule keypoints:
    input:
        unpack(with_config(get_keypoint_inputs)),
    output:
        points=expand("results/keypoints/{{kpset}}/az{az}.json", az=RENDER_TAGS),
        provenance="results/provenance/keypoints/{kpset}.json",
    log:
        "logs/keypoints/{kpset}.log",
    benchmark:
        "benchmarks/keypoints/{kpset}.tsv"
    wildcard_constraints:
        kpset="render",
    params:
        detector=model_sets.detector(config),
        azimuths=config["azimuths"],
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/keypoints.py"


use rule keypoints as keypoints_generated with:
    output:
        points=expand("results/keypoints/{{kpset}}/az{az}.json", az=LADDER_TAGS),
        provenance="results/provenance/keypoints/{kpset}.json",
    wildcard_constraints:
        kpset="|".join(CONDITIONS),
    params:
        detector=model_sets.detector(config),
        azimuths=config["ladder"]["azimuths"],
        model_set=config["model_set"],
        lineage=LINEAGE,


use rule keypoints as keypoints_restyled with:
    output:
        points=expand("results/keypoints/{{kpset}}/az{az}.json", az=RESTYLE_TAGS),
        provenance="results/provenance/keypoints/{kpset}.json",
    wildcard_constraints:
        kpset="|".join(f"restyle/{s}" for s in STYLES),
    params:
        detector=model_sets.detector(config),
        azimuths=config["restyle"]["azimuths"],
        model_set=config["model_set"],
        lineage=LINEAGE,
