"""The camera LoRA's instruction embeddings, from the generator's own text encoder in a job of their own,
so the training job never holds the encoder (RFD 1140: it took ~7 GiB of the desk's card to encode ~30 tokens)."""

from __future__ import annotations


def lora_embeddings_stage(records: str, embeddings_out: str, backend: str, model: str, revision: str | None,
                          text_encoder_dtype: str, device: str, max_sequence_length: int, model_set: str,
                          machine: str = "desk") -> dict:
    from fourloops import determinism, lora_embeddings, lora_records
    from fourloops.card import check_card

    determinism.apply(None)  # the text encoder draws nothing

    check_card(device, machine)
    found = lora_records.read_records(records)
    fields = lora_embeddings.compute_embeddings(backend, model, revision, text_encoder_dtype, device, found,
                                                embeddings_out, max_sequence_length=max_sequence_length)
    return fields | {"precision": text_encoder_dtype, "models": [{"backend": backend, "model": model,
                                                                  "components": fields["components_loaded"]}]}
