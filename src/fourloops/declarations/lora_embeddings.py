"""The lora_embeddings stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.lora_embeddings is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops import model_sets
from fourloops.stage import AskContext, Gpu, Stage


def ask(ctx: AskContext, wildcards: dict, params: dict):
    from fourloops import asks

    job = params["job"]
    if job["model_set"] == "smoke":  # the tiny text encoder on the CPU
        return asks.stage_ask(ctx.facts, "smoke_lora_embeddings")
    return asks.text_encoder_ask(ctx.facts, job, n_prompts=int(job.get("records", 1)), measured=ctx.measured,
                                 machine=ctx.machine)


def _needs(settings: dict, rule: str) -> list:
    """The generator's own needs (device, package, weights): its text encoder loads from the same place."""
    from fourloops.preflight import generator_needs

    return generator_needs(settings, rule)


def needs(params: dict) -> list:
    return _needs(params["job"], "lora_embeddings")


def _key(settings: dict) -> str:
    from fourloops.asks import text_encoder_key

    return text_encoder_key(settings)


def measures(record: dict) -> str | None:
    job = (record.get("params") or {}).get("job")
    return _key(job) if isinstance(job, dict) and {"backend", "text_encoder_dtype"} <= set(job) else None


def _ask(facts: dict, settings: dict):
    from fourloops.asks import text_encoder_ask

    return text_encoder_ask(facts, settings)


# The generator's text encoder alone, declared once: the probe rule measures it for the lora_embeddings job's
# forecast and wall (its sizing build is the generator's: the encoder loads from the same pipeline directory).
TEXT_ENCODER = Gpu(
    name="text_encoder", key=_key, probe="fourloops.stages.probe:_probe_text_encoder",
    settings=model_sets.lora_embeddings, ask=_ask, needs=_needs, build_of=lambda s: s["backend"],
    precision=lambda s: str(s["text_encoder_dtype"]), resolution=lambda s: None,
    smoke_inputs=lambda config: model_sets.built_models(config, "generator"))

STAGE = Stage(name="lora_embeddings", code="fourloops.stages.lora_embeddings",
              rules=("lora_embeddings",), profile="desk", ask=ask, needs=needs, measures=measures,
              gpus=(TEXT_ENCODER,))
