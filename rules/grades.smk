# EditScore grades of every restyled view of a style, against its render: one scorer load per style,
# in its own job (never the generator's process).
from fourloops.rule_functions.grades import get_grades_inputs, get_grades_params


rule grades:
    input:
        unpack(with_config(get_grades_inputs)),
    output:
        table=report(
            "results/grades/{style}.csv",
            caption="../report/grades_table.rst",
            category="Grades",
            labels={"style": "{style}", "figure": "grades"},
        ),
        summary="results/grades/{style}.summary.json",
        provenance="results/provenance/grades/{style}.json",
    log:
        "logs/grades/{style}.log",
    benchmark:
        "benchmarks/grades/{style}.tsv"
    params:
        job=with_config(get_grades_params),
        model_set=config["model_set"],
        lineage=LINEAGE,
        **SCORER_WEIGHTS,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/grades.py"
