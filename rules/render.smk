# The Anny body and its renders: ground truth for everything downstream. One job builds the body
# once and renders every azimuth (one process import of anny and one GL context, not eight).
from fourloops.rule_functions.render import camera_settings


rule render:
    output:
        skeleton="results/render/skeleton.json",
        images=expand("results/render/az{az}.png", az=RENDER_TAGS),
        keypoints=expand("results/render/az{az}.json", az=RENDER_TAGS),
        provenance="results/provenance/render/render.json",
    log:
        "logs/render/render.log",
    benchmark:
        "benchmarks/render/render.tsv"
    params:
        azimuths=config["azimuths"],
        body=config["render"]["body"],
        camera=camera_settings(config),
        background=config["render"]["background"],
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/render.py"
