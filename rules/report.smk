# Report-only pages and the target that gathers everything the report shows:
#   snakemake report_contents && snakemake --report report.html report_contents
from fourloops.rule_functions.report import get_report_contents, planned


rule ladder_table:
    input:
        table="results/ladder.csv",
    output:
        page=report(
            "results/report/ladder.html",
            caption="../report/ladder_table.rst",
            category="Ladder",
            labels={"figure": "ladder table"},
        ),
        provenance="results/provenance/ladder_table/ladder.json",
    log:
        "logs/ladder_table/ladder.log",
    benchmark:
        "benchmarks/ladder_table/ladder.tsv"
    params:
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/ladder_table.py"


rule run_plan:
    input:
        # after the ladder: the benchmark files of the jobs that made it are then written
        table="results/ladder.csv",
        plot="results/ladder.png",
    output:
        page=report(
            "results/report/plan.html",
            caption="../report/run_plan.rst",
            category="Run",
            labels={"figure": "walls and plan"},
        ),
        provenance="results/provenance/run_plan/plan.json",
    log:
        "logs/run_plan/plan.log",
    benchmark:
        "benchmarks/run_plan/plan.tsv"
    params:
        plan=lambda wildcards: planned(FOURLOOPS, ["results/ladder.csv", "results/ladder.png"]),
        model_set=config["model_set"],
        lineage=LINEAGE,
    # local: its plan is where the submitting Snakemake places each job; a job's own Snakemake on a SLURM node
    # evaluates params again under the slurm-jobstep executor, which places nothing
    localrule: True
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/run_plan.py"


rule report_contents:
    input:
        with_config(get_report_contents),
