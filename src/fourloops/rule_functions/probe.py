"""rules/probe.smk: what a component's probe loads, read from its GPU declaration (fourloops.stage.Gpu)."""

from __future__ import annotations

LINEAGE = False  # a job's inputs and params, not its code: a change shows in them

from fourloops.model_sets import sizing_model
from fourloops.stage import gpu


def get_probe_inputs(config: dict, wildcards) -> dict:
    """The smoke and sizing sets' models are built by the workflow; real weights live in the HF cache (preflight
    checks them)."""
    component = gpu(wildcards.component)
    if config["model_set"] == "sizing":
        return {"model": sizing_model(component.build_for(component.settings(config)))}
    if config["model_set"] == "smoke" and component.smoke_inputs is not None:
        return component.smoke_inputs(config)
    return {}


def get_probe_settings(config: dict, wildcards) -> dict:
    """The settings of the one component this job loads, as its GPU declaration gives them."""
    return gpu(wildcards.component).settings(config)
