"""The probe stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.probe is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops.stage import AskContext, Gpu, Stage
from fourloops.stage import gpu as _gpu  # an undeclared component is refused there, naming the declared ones


def ask(ctx: AskContext, wildcards: dict, params: dict):
    """A probe job's ask: its component's at the largest batch it times. A component with a batch knob is timed at
    one item a call and at a batch chosen as a job's is (fourloops.batching.choose): a number, that many; `auto`,
    the largest up to batching.PROBE_AUTO_MOST whose ask fits the card of the machine the probe runs on. The job
    gets it as its batch resource (scripts/probe.py)."""
    from fourloops import asks, batching

    if params["model_set"] == "smoke":  # the tiny models on the CPU
        return asks.stage_ask(ctx.facts, "smoke_generate")
    component, settings = _gpu(wildcards["component"]), params["settings"]
    if component.batch_most is None:
        return component.ask(ctx.facts, settings)
    key = next((".".join(k.config) for k in component.knobs if k.kind == "batch"), f"{component.name} batch")
    value = batching.setting(settings.get("batch", 1), key)
    most = component.batch_most(settings)
    if value == batching.AUTO:
        most = min(most, batching.PROBE_AUTO_MOST)
    return batching.choose(lambda b: component.ask(ctx.facts, settings, batch=b), value, most=most,
                           limit_gib=batching.card_gib(ctx.machine, ctx.provided_vram_mb), key=key)


def needs(params: dict) -> list:
    gpu = _gpu(params["component"])
    return list(gpu.needs(params["settings"], "probe_model")) if gpu.needs else []


def knobs(wildcards: dict) -> tuple:
    """The probed component's own knobs, as the job's params carry its settings."""
    return _gpu(wildcards["component"]).knobs_at(("settings",))


# lora_step: one optimizer step of the LoRA's training, measured by bench/sizing_gpu.py with a lora_train job's
# settings (no probe rule job: its settings are a training job's, not a component's)
def _lora_key(settings: dict) -> str:
    from fourloops.asks import lora_key

    return lora_key(settings)


LORA_STEP = Gpu(name="lora_step", key=_lora_key,
                probe="fourloops.stages.probe:_probe_lora_step", precision=lambda s: str(s["frozen_dtype"]))

STAGE = Stage(name="probe", code="fourloops.stages.probe",
              rules=("probe_model",), profile="desk", ask=ask, needs=needs, knobs_of=knobs,
              offload_at=lambda wildcards: ("settings",) if _gpu(wildcards["component"]).offload else None,
              gpus=(LORA_STEP,))
