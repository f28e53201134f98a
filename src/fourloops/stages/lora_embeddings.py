"""The camera LoRA's instruction embeddings, from the generator's own text encoder in a job of their own,
so the training job never holds the encoder (RFD 1140: it took ~7 GiB of the desk's card to encode ~30 tokens)."""

from __future__ import annotations

from fourloops.stage import AskContext, Stage


def lora_embeddings_stage(records: str, embeddings_out: str, backend: str, model: str, revision: str | None,
                          text_encoder_dtype: str, device: str, max_sequence_length: int, model_set: str,
                          machine: str = "desk") -> dict:
    from fourloops import lora_embeddings, lora_records
    from fourloops.card import check_card

    check_card(device, machine)
    found = lora_records.read_records(records)
    fields = lora_embeddings.compute_embeddings(backend, model, revision, text_encoder_dtype, device, found,
                                                embeddings_out, max_sequence_length=max_sequence_length)
    return fields | {"precision": text_encoder_dtype, "models": [{"backend": backend, "model": model,
                                                                  "components": fields["components_loaded"]}]}


# ------------------------------------------------------------------------------------ declaration
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


STAGE = Stage(name="lora_embeddings", rules=("lora_embeddings",), profile="desk", ask=ask, needs=needs)
