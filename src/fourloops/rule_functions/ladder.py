"""rules/ladder.smk: every source's fit and every condition's manifest."""

from __future__ import annotations

LINEAGE = False  # a job's inputs, not its code: a change shows in them

from fourloops.names import sources


def get_ladder_inputs(config: dict, wildcards) -> dict:
    return {
        "fits": [f"results/fit/{source}.json" for source in sources(config)],
        "manifests": [f"results/generate/{condition}/views.json" for condition in config["conditions"]],
    }
