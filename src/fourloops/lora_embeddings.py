"""The camera LoRA's instruction embeddings: each record's instruction through the generator's own text encoder
(its pipeline's `encode_prompt`; for Qwen-Image-Edit the encoder also sees the source view, as the pipeline
does), the generator's transformer and VAE not loaded; one safetensors file."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from fourloops.io import atomic_path
from fourloops.loading import _import_omnigen2, _torch_dtype
from fourloops.lora_records import LoraError

EMBEDDINGS_META_KEY = "fourloops.lora_embeddings"


def _pipeline_without(backend: str, path: Path, dtype, parts: tuple[str, ...]):
    """The generator's own pipeline class, loaded from `path` with `parts` left out (None: never read)."""
    skip = {p: None for p in parts}
    if backend == "qwen_image_edit_plus":
        from diffusers import QwenImageEditPlusPipeline

        return QwenImageEditPlusPipeline.from_pretrained(str(path), dtype=dtype, local_files_only=True, **skip)
    if backend == "omnigen2":
        OmniGen2Pipeline, _ = _import_omnigen2()
        return OmniGen2Pipeline.from_pretrained(str(path), dtype=dtype, local_files_only=True,
                                                trust_remote_code=True, **skip)
    raise LoraError(f"generator.backend = {backend!r}: no LoRA training for it; allowed: qwen_image_edit_plus, omnigen2")


def load_encoder(backend: str, model: str, revision: str | None, dtype: str, device: str):
    """The generator's pipeline with its text encoder alone on `device` (transformer and VAE never read): (pipe,
    the components loaded, the model's path, its source)."""
    import torch

    from fourloops.hub import resolve_model

    path, source = resolve_model(model, revision)
    pipe = _pipeline_without(backend, path, _torch_dtype(dtype), ("transformer", "vae"))
    pipe.to(device)
    loaded = sorted(k for k, v in pipe.components.items() if isinstance(v, torch.nn.Module))
    return pipe, loaded, path, source


def encode(pipe, backend: str, instruction: str, source, device: str, max_sequence_length: int):
    """One instruction through the pipeline's encode_prompt: (embeds, mask), each with a batch axis of one. For
    Qwen-Image-Edit the encoder also sees `source` (a PIL image, the record's source view), as the pipeline does."""
    import torch

    if backend == "qwen_image_edit_plus":
        from diffusers.pipelines.qwenimage.pipeline_qwenimage_edit_plus import (
            CONDITION_IMAGE_SIZE, calculate_dimensions)

        w, h = calculate_dimensions(CONDITION_IMAGE_SIZE, source.width / source.height)
        embeds, mask = pipe.encode_prompt(prompt=instruction, image=[pipe.image_processor.resize(source, h, w)],
                                          device=device, max_sequence_length=max_sequence_length)
    else:
        embeds, mask, _, _ = pipe.encode_prompt(instruction, do_classifier_free_guidance=False, device=device,
                                                max_sequence_length=max_sequence_length)
    if mask is None:  # the pipeline drops an all-ones mask
        mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=embeds.device)
    return embeds, mask


def compute_embeddings(backend: str, model: str, revision: str | None, dtype: str, device: str,
                       records: list[dict], out_path: str, max_sequence_length: int = 1024) -> dict:
    """Each record's instruction through the generator's text encoder (its pipeline's encode_prompt), written
    to one safetensors file: `<id>.embeds` (seq, dim) and `<id>.mask` (seq). Returns provenance fields."""
    import torch
    from safetensors.torch import save_file

    t_load = time.perf_counter()
    pipe, loaded, path, source = load_encoder(backend, model, revision, dtype, device)
    load_seconds = time.perf_counter() - t_load
    tensors = {}
    prompt_seconds = []
    t0 = time.perf_counter()
    with torch.inference_mode():
        for rec in records:
            t1 = time.perf_counter()
            image = None
            if backend == "qwen_image_edit_plus":
                from PIL import Image

                with Image.open(rec["source"]) as im:
                    image = im.convert("RGB")
            embeds, mask = encode(pipe, backend, rec["instruction"], image, device, max_sequence_length)
            tensors[f"{rec['id']}.embeds"] = embeds[0].detach().to("cpu").contiguous()
            tensors[f"{rec['id']}.mask"] = mask[0].detach().to("cpu", torch.long).contiguous()
            prompt_seconds.append(round(time.perf_counter() - t1, 4))
    meta = {"backend": backend, "model": model, "dtype": dtype, "records": len(records),
            "instructions_sha256": hashlib.sha256("\n".join(r["instruction"] for r in records).encode()).hexdigest()}
    with atomic_path(out_path) as tmp:
        save_file(tensors, str(tmp), metadata={EMBEDDINGS_META_KEY: json.dumps(meta, sort_keys=True)})
    return {"components_loaded": loaded, "model_path": str(path), "model_source": source.get("source"),
            "embeddings": {"records": len(records), "dtype": dtype, "seconds": round(time.perf_counter() - t0, 3),
                           "max_tokens": int(max(t.shape[0] for k, t in tensors.items() if k.endswith(".embeds")))},
            # where the job's seconds went (a forecast's parts: the encoder's load, then each prompt, the first with
            # its warm-up)
            "timing": {"load_seconds": round(load_seconds, 4), "prompt_seconds": prompt_seconds}}
