"""The lora_train stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.lora_train is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops.stage import AskContext, Knob, Stage


def profile_of(config: dict) -> str:
    return config["lora"]["profile"]


def ask(ctx: AskContext, wildcards: dict, params: dict):
    from fourloops import asks

    from fourloops import batching

    job = params["train"]
    if job["model_set"] == "smoke":  # the tiny transformer on the CPU
        return asks.stage_ask(ctx.facts, "smoke_lora_train")
    return batching.choose(lambda b: asks.lora_ask(ctx.facts, job, batch=b, measured=ctx.measured, machine=ctx.machine),
                           job.get("micro_batch", 1), most=int(job["accumulation"]),
                           limit_gib=batching.card_gib(ctx.machine, ctx.provided_vram_mb), key="lora.micro_batch")


def needs(params: dict) -> list:
    """The generator's own needs (device, package, weights), and bitsandbytes for 8-bit AdamW on CUDA."""
    from fourloops.preflight import Need, generator_needs

    job = params["train"]
    out = generator_needs(job, "lora_train")
    if str(job["device"]).startswith("cuda"):
        out.insert(1, Need("package", "bitsandbytes", rule="lora_train"))  # 8-bit AdamW
    return out


def measures(record: dict) -> str | None:
    from fourloops.asks import lora_key

    job = (record.get("params") or {}).get("train")
    if isinstance(job, dict) and record.get("model_set") != "smoke" and {"backend", "frozen_dtype", "resolution"} <= set(job):
        return lora_key(job)
    return None


# RFD 1140's order: the text encoder off the card first (~7 GiB), then bf16 frozen weights, then the resolution.
KNOBS = (
    Knob(("train",), "text_encoder", ("lora", "text_encoder"), "setting", values=("precomputed",)),
    Knob(("train",), "frozen_dtype", ("lora", "frozen_dtype"), "precision"),
    Knob(("train",), "resolution", ("lora", "resolution"), "size", values=(384, 256)),
    Knob(("train",), "micro_batch", ("lora", "micro_batch"), "batch"),
)

STAGE = Stage(name="lora_train", code="fourloops.stages.lora_train",
              rules=("lora_train",), profile="desk", profile_of=profile_of, ask=ask, needs=needs,
              measures=measures, keep_last_good=True, knobs=KNOBS,
              batch_changes_bytes=True)  # a step's sums run in its micro-batches' order
