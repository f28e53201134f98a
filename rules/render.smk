# The Anny body and its renders: ground truth for everything downstream.


rule skeleton:
    output:
        skeleton="results/render/skeleton.json",
        provenance="results/provenance/skeleton/skeleton.json",
    log:
        "logs/skeleton/skeleton.log",
    benchmark:
        "benchmarks/skeleton/skeleton.tsv"
    params:
        body=config["render"]["body"],
        model_set=config["model_set"],
    threads: 1
    resources:
        profile="desk",
        mem_mb=2000,
        vram_mb=0,
    script:
        "../scripts/skeleton.py"


rule render:
    input:
        skeleton="results/render/skeleton.json",
    output:
        image="results/render/az{az}.png",
        keypoints="results/render/az{az}.json",
        provenance="results/provenance/render/az{az}.json",
    log:
        "logs/render/az{az}.log",
    benchmark:
        "benchmarks/render/az{az}.tsv"
    params:
        azimuth=get_render_azimuth,
        body=config["render"]["body"],
        camera=camera_settings(),
        background=config["render"]["background"],
        model_set=config["model_set"],
    threads: 1
    resources:
        profile="desk",
        mem_mb=2000,
        vram_mb=0,
    script:
        "../scripts/render.py"
