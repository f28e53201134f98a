# This run's results against another run's (config compare.against: its working directory, a results/ directory or a
# listing file): one verdict per artifact, after everything the report shows (fourloops.compare; config/compare.yaml).
from fourloops.rule_functions.compare import get_compare_inputs, get_compare_params


rule compare:
    input:
        unpack(with_config(get_compare_inputs)),
    output:
        table="results/compare/against.csv",
        page=report(
            "results/compare/against.html",
            caption="../report/compare.rst",
            category="Run",
            labels={"figure": "against another run"},
        ),
        provenance="results/provenance/compare/against.json",
    log:
        "logs/compare/against.log",
    benchmark:
        "benchmarks/compare/against.tsv"
    params:
        job=with_config(get_compare_params),
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/compare.py"
