"""The lora_embeddings stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.lora_embeddings is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops.stage import AskContext, Stage


def ask(ctx: AskContext, wildcards: dict, params: dict):
    from fourloops import asks

    job = params["job"]
    if job["model_set"] == "smoke":  # the tiny text encoder on the CPU
        return asks.stage_ask(ctx.facts, "smoke_lora_embeddings")
    return asks.text_encoder_ask(ctx.facts, job, n_prompts=int(job.get("records", 1)))


def needs(params: dict) -> list:
    """The generator's own needs (device, package, weights): its text encoder loads from the same place."""
    from fourloops.preflight import generator_needs

    return generator_needs(params["job"], "lora_embeddings")


STAGE = Stage(name="lora_embeddings", code="fourloops.stages.lora_embeddings",
              rules=("lora_embeddings",), profile="desk", ask=ask, needs=needs)
