"""The camera LoRA's training: the frozen generator transformer and its VAE, never its text encoder (the
embeddings come from their own job), resumable from checkpoints. Its profile tag comes from config
lora.profile (desk: bf16 frozen weights fit the desk at 512; pod: the seeds' fp32 setup)."""

from __future__ import annotations

from fourloops.stage import AskContext, Knob, Stage


def lora_train_stage(records: str, embeddings: str, lora_out: str, loss_csv: str, loss_png: str,
                     checkpoint_dir: str, train: dict, checkpoint_every: int, machine: str = "desk") -> dict:
    from fourloops import lora
    from fourloops.card import check_card

    spec = lora.TrainSpec.of(**train, checkpoint_every=int(checkpoint_every))
    check_card(spec.device, machine)
    fields = lora.train(spec, records, embeddings, lora_out, loss_csv, loss_png, checkpoint_dir)
    return fields | {"seed": spec.seed, "checkpoint_every": spec.checkpoint_every, "checkpoint_dir": checkpoint_dir,
                     "models": [{"backend": spec.backend, "model": spec.model, "components": fields["components_loaded"]}]}


def checkpoint_every_of(config: dict) -> int:
    """How often a resume checkpoint is written: read from the config by the job, never a param (it changes
    nothing the job computes, so a new interval retrains nothing)."""
    lora = config["lora"]
    return int(lora["smoke"]["checkpoint_every"] if config["model_set"] == "smoke" else lora["checkpoint_every"])


# ------------------------------------------------------------------------------------ declaration
def profile_of(config: dict) -> str:
    return config["lora"]["profile"]


def ask(ctx: AskContext, wildcards: dict, params: dict):
    from fourloops import asks

    job = params["train"]
    if job["model_set"] == "smoke":  # the tiny transformer on the CPU
        return asks.stage_ask(ctx.facts, "smoke_lora_train")
    return asks.lora_ask(ctx.facts, job, measured=ctx.measured, machine=ctx.machine)


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
)

STAGE = Stage(name="lora_train", rules=("lora_train",), profile="desk", profile_of=profile_of, ask=ask, needs=needs,
              measures=measures, keep_last_good=True, knobs=KNOBS)
