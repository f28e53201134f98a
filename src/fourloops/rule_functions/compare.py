"""rules/compare.smk: what the comparison waits for (everything the report shows of the run) and its params."""

from __future__ import annotations

LINEAGE = False  # a job's inputs and params, not its code: a change shows in them

from fourloops.rule_functions.report import shown


def get_compare_inputs(config: dict, wildcards) -> dict:
    return {"shown": shown(config)}


def get_compare_params(config: dict, wildcards) -> dict:
    """The other tree, what it holds now (a changed tree compares again), and the tolerances (config/compare.yaml:
    a changed tolerance compares again)."""
    from snakemake.exceptions import WorkflowError

    from fourloops import compare
    from fourloops.yamlcheck import YamlError

    against = config["compare"]["against"]
    if against is None:
        raise WorkflowError("results/compare/against.csv: config compare.against is not set; allowed: the other run's "
                            f"path, {compare.ALLOWED}")
    try:
        state = compare.tree_state(against)
        tolerances = compare.tolerances_data()
    except compare.CompareError as err:
        raise WorkflowError(f"config compare.against = {against!r}: {err}") from None
    except YamlError as err:
        raise WorkflowError(str(err)) from None
    return {"against": against, "state": state, "tolerances": tolerances,
            "across_machines": bool(config["compare"]["across_machines"])}
