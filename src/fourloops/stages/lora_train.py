"""The camera LoRA's training: the frozen generator transformer and its VAE, never its text encoder (the
embeddings come from their own job), resumable from checkpoints. Its profile tag comes from config
lora.profile (desk: bf16 frozen weights fit the desk at 512; pod: the seeds' fp32 setup)."""

from __future__ import annotations


def lora_train_stage(records: str, embeddings: str, lora_out: str, loss_csv: str, loss_png: str,
                     checkpoint_dir: str, train: dict, checkpoint_every: int, machine: str = "desk",
                     micro_batch: int = 1) -> dict:
    """`micro_batch`: samples a forward, the job's `batch` resource (lora.micro_batch as resolved for its machine)."""
    from fourloops import determinism, lora
    from fourloops.card import check_card

    spec = lora.TrainSpec.of(**train, checkpoint_every=int(checkpoint_every))
    determinism.apply(spec.seed)
    check_card(spec.device, machine)
    fields = lora.train(spec, records, embeddings, lora_out, loss_csv, loss_png, checkpoint_dir, micro_batch=micro_batch)
    return fields | {"seed": spec.seed, "checkpoint_every": spec.checkpoint_every, "checkpoint_dir": checkpoint_dir,
                     "models": [{"backend": spec.backend, "model": spec.model, "components": fields["components_loaded"]}]}


def checkpoint_every_of(config: dict) -> int:
    """How often a resume checkpoint is written: read from the config by the job, never a param (it changes
    nothing the job computes, so a new interval retrains nothing)."""
    lora = config["lora"]
    return int(lora["smoke"]["checkpoint_every"] if config["model_set"] == "smoke" else lora["checkpoint_every"])
