# The ladder table: one row per condition x azimuth, plus the floor and floor_gt rows per azimuth.
from fourloops.rule_functions.ladder import get_ladder_inputs


rule ladder:
    input:
        unpack(with_config(get_ladder_inputs)),
    output:
        table=report(
            ensure("results/ladder.csv", non_empty=True),
            caption="../report/ladder_csv.rst",
            category="Ladder",
            labels={"figure": "ladder table (csv)"},
        ),
        plot=report(
            "results/ladder.png",
            caption="../report/ladder_plot.rst",
            category="Ladder",
            labels={"figure": "error vs azimuth"},
        ),
        provenance="results/provenance/ladder/ladder.json",
    log:
        "logs/ladder/ladder.log",
    benchmark:
        "benchmarks/ladder/ladder.tsv"
    params:
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/ladder.py"
