# Keypoint drift per style: the renders' detected keypoints against the restyled views'.
from fourloops.rule_functions.drift import get_drift_inputs


rule drift:
    input:
        unpack(with_config(get_drift_inputs)),
    output:
        table="results/drift/{style}.csv",
        regions=report(
            "results/drift/{style}.regions.csv",
            caption="../report/drift_regions.rst",
            category="Drift",
            labels={"style": "{style}", "figure": "regions"},
        ),
        png=report(
            "results/drift/{style}.png",
            caption="../report/drift_heatmap.rst",
            category="Drift",
            labels={"style": "{style}", "figure": "heatmap"},
        ),
        provenance="results/provenance/drift/{style}.json",
    log:
        "logs/drift/{style}.log",
    benchmark:
        "benchmarks/drift/{style}.tsv"
    params:
        style=lambda wildcards: wildcards.style,
        azimuths=config["restyle"]["azimuths"],
        drift=config["drift"],
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/drift.py"
