"""The generate stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.generate is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops import model_sets
from fourloops.stage import AskContext, Build, Gpu, Knob, Stage


def ask(ctx: AskContext, wildcards: dict, params: dict):
    from fourloops import asks

    job = params["job"]
    if job["model_set"] == "smoke":  # the tiny generator on the CPU
        return asks.stage_ask(ctx.facts, "smoke_generate")
    return generator_batch_ask(ctx, job["generator"], n_references=len(job["reference_azimuths"]),
                               n_views=len(job["azimuths"]))


def generator_batch_ask(ctx: AskContext, gen: dict, *, n_references: int, n_views: int):
    """A generate or restyle job's ask at the batch its `generator.batch` asks for on the job's machine
    (fourloops.batching): as many views a call as the backend takes and the card holds."""
    from fourloops import asks, batching
    from fourloops.backends import MAX_BATCH

    def at(b: int):
        return asks.generator_ask(ctx.facts, gen, n_references=n_references, n_views=n_views, batch=b,
                                  measured=ctx.measured, machine=ctx.machine)

    return batching.choose(at, gen.get("batch", 1), most=min(n_views, MAX_BATCH.get(gen["backend"], 1)),
                           limit_gib=batching.card_gib(ctx.machine, ctx.provided_vram_mb), key="generator.batch")


def needs(params: dict) -> list:
    """The generator's needs; a `lora: true` condition also loads peft (its LoRA file is an input the DAG makes,
    not something the machine must hold beforehand)."""
    from fourloops.preflight import Need, generator_needs

    out = generator_needs(params["job"]["generator"], "generate")
    if params["job"].get("lora"):
        out.append(Need("package", "peft", rule="generate"))
    return out


def measures(record: dict) -> str | None:
    from fourloops.asks import generator_key

    gen = ((record.get("params") or {}).get("job") or {}).get("generator")
    if isinstance(gen, dict) and {"backend", "precision", "size"} <= set(gen):
        return generator_key(gen)
    return None


# The generator, declared once: the probe rule, the sizing set and the levers read it (fourloops.stage.Gpu).
def _generator_key(settings: dict) -> str:
    from fourloops.asks import generator_key

    return generator_key(settings)


def _generator_ask(facts: dict, settings: dict, batch: int = 1):
    from fourloops.asks import generator_ask

    return generator_ask(facts, settings, batch=batch, measured=None)


def _generator_most(settings: dict) -> int:
    from fourloops.backends import MAX_BATCH

    return MAX_BATCH.get(settings["backend"], 1)


def _generator_needs(settings: dict, rule: str) -> list:
    from fourloops.preflight import generator_needs

    return generator_needs(settings, rule)


GENERATOR = Gpu(
    name="generator", key=_generator_key, probe="fourloops.stages.probe:_probe_generator",
    settings=model_sets.generator, ask=_generator_ask, needs=_generator_needs, batch_most=_generator_most,
    knobs=(Knob((), "precision", ("generator", "precision"), "precision"), Knob((), "size", ("generator", "size"), "size"),
           Knob((), "batch", ("generator", "batch"), "batch")),
    builds=(Build("omnigen2", "omnigen2"), Build("qwen_image_edit_plus", "qwen_image_edit_plus")),
    build_of=lambda s: s["backend"], resolution=lambda s: int(s["size"]),
    smoke_inputs=lambda config: model_sets.built_models(config, "generator"), offload=True)
# The generator's knobs, as a generate or restyle job's params carry them.
GENERATOR_KNOBS = GENERATOR.knobs_at(("job", "generator"))

STAGE = Stage(name="generate", code="fourloops.stages.generate",
              rules=("generate",), profile="pod", ask=ask, needs=needs, measures=measures,
              keep_last_good=True, knobs=GENERATOR_KNOBS, gpus=(GENERATOR,),
              # a view's low bits change with what else is in its call (the tiny OmniGen2 on the CPU: one view of
              # three 1/255 off its own; matrix products tile by the batch's rows)
              batch_changes_bytes=True,
              offload_at=lambda wildcards: ("job", "generator"))
