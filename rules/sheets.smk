# Contact sheets for the report: one image per set, its asked azimuths in a row.


rule render_sheet:
    input:
        images=expand("results/render/az{az}.png", az=RENDER_TAGS),
    output:
        sheet=report(
            "results/sheets/render.png",
            caption="../report/render_sheet.rst",
            category="Views",
            subcategory="renders",
            labels={"set": "render", "figure": "contact sheet"},
        ),
        provenance="results/provenance/render_sheet/render.json",
    log:
        "logs/render_sheet/render.log",
    benchmark:
        "benchmarks/render_sheet/render.tsv"
    params:
        azimuths=config["azimuths"],
        title=f"renders of the Anny body ({config['model_set']} model set)",
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/contact_sheet.py"


rule generated_sheet:
    input:
        images=expand("results/generate/{{condition}}/az{az}.png", az=LADDER_TAGS),
        manifest="results/generate/{condition}/views.json",
    output:
        sheet=report(
            "results/sheets/{condition}.png",
            caption="../report/generated_sheet.rst",
            category="Views",
            subcategory="generated",
            labels={"set": "condition {condition}", "figure": "contact sheet"},
        ),
        provenance="results/provenance/generated_sheet/{condition}.json",
    log:
        "logs/generated_sheet/{condition}.log",
    benchmark:
        "benchmarks/generated_sheet/{condition}.tsv"
    params:
        azimuths=config["ladder"]["azimuths"],
        title=lambda wildcards: (
            f"condition {wildcards.condition}: generated views from the renders at "
            f"{config['conditions'][wildcards.condition]['references']} deg ({config['model_set']} model set)"
        ),
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/contact_sheet.py"
