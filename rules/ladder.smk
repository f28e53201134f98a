# The ladder table: one row per condition x azimuth, plus the floor and floor_gt rows per azimuth.


rule ladder:
    input:
        unpack(get_ladder_inputs),
    output:
        table=ensure("results/ladder.csv", non_empty=True),
        plot="results/ladder.png",
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
