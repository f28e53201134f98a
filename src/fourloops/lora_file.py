"""The camera LoRA's file (a contract between the LoRA training stage, which writes it, and the generator, which
loads it): its tensors are `peft.get_peft_model_state_dict` of the pipeline's `transformer` (LoRA A/B only, adapter
name stripped), its safetensors metadata key `fourloops.lora` holds the JSON the adapter is rebuilt from (see
`LORA_METADATA_FIELDS`). `_apply_lora` injects it with `peft.inject_adapter_in_model` (plain torch modules:
diffusers' QwenImage transformer and OmniGen2's transformer alike), unmerged, and checks every tensor loaded."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

# The LoRA file contract (the training stage writes exactly this): the safetensors metadata key and its fields.
LORA_METADATA_KEY = "fourloops.lora"
LORA_TARGET_MODULES = ("to_q", "to_k", "to_v", "to_out.0")  # the transformer's attention projections
LORA_FROZEN_DTYPES = ("bf16", "fp32")
LORA_METADATA_FIELDS = {  # field -> what is allowed
    "rank": "int >= 1", "alpha": "number > 0", "dropout": "number in [0, 1) (not applied at inference)",
    "target_modules": f"a non-empty list of distinct names among {list(LORA_TARGET_MODULES)}",
    "backend": "a backend name", "base_model": "non-empty str", "model_set": "non-empty str", "steps": "int >= 0",
    "resolution": "int >= 1", "frozen_dtype": f"one of {list(LORA_FROZEN_DTYPES)}",
}
LORA_ADAPTER_NAME = "camera"


class LoraFileError(ValueError):
    """A LoRA file that cannot be loaded into this generator (metadata, backend, keys, shapes or values)."""



def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_lora_metadata(path: str | os.PathLike) -> dict:
    """The `fourloops.lora` metadata of a LoRA file, checked against the contract (no tensor is read)."""
    from safetensors import SafetensorError, safe_open

    where = f"LoRA file {os.fspath(path)!r}"
    if not Path(path).is_file():
        raise LoraFileError(f"{where} does not exist (or is not a file); the LoRA training stage writes it")
    try:
        with safe_open(os.fspath(path), framework="pt") as fh:
            header = fh.metadata() or {}
    except (SafetensorError, OSError, ValueError) as exc:
        raise LoraFileError(f"{where} is not a readable safetensors file: {exc}") from exc
    if LORA_METADATA_KEY not in header:
        raise LoraFileError(
            f"{where} has no safetensors metadata key {LORA_METADATA_KEY!r} (its metadata keys: "
            f"{sorted(header)}); a camera LoRA carries it as JSON with the fields {list(LORA_METADATA_FIELDS)}"
        )
    try:
        meta = json.loads(header[LORA_METADATA_KEY])
    except json.JSONDecodeError as exc:
        raise LoraFileError(f"{where}: metadata key {LORA_METADATA_KEY!r} is not valid JSON ({exc})") from exc
    if not isinstance(meta, dict):
        raise LoraFileError(f"{where}: metadata key {LORA_METADATA_KEY!r} must hold a JSON object, "
                            f"got {type(meta).__name__}")
    missing = [k for k in LORA_METADATA_FIELDS if k not in meta]
    if missing:
        raise LoraFileError(f"{where}: metadata {LORA_METADATA_KEY!r} lacks {missing}; "
                            f"required fields: {list(LORA_METADATA_FIELDS)}")

    def bad(key: str) -> LoraFileError:
        return LoraFileError(f"{where}: metadata {LORA_METADATA_KEY}.{key} = {meta[key]!r}; "
                             f"allowed: {LORA_METADATA_FIELDS[key]}")

    if not _is_int(meta["rank"]) or meta["rank"] < 1:
        raise bad("rank")
    if not _is_number(meta["alpha"]) or meta["alpha"] <= 0:
        raise bad("alpha")
    if not _is_number(meta["dropout"]) or not 0 <= meta["dropout"] < 1:
        raise bad("dropout")
    targets = meta["target_modules"]
    if (not isinstance(targets, list) or not targets or len(set(map(str, targets))) != len(targets)
            or not all(isinstance(t, str) and t in LORA_TARGET_MODULES for t in targets)):
        raise bad("target_modules")
    for key in ("backend", "base_model", "model_set"):
        if not isinstance(meta[key], str) or not meta[key]:
            raise bad(key)
    if not _is_int(meta["steps"]) or meta["steps"] < 0:
        raise bad("steps")
    if not _is_int(meta["resolution"]) or meta["resolution"] < 1:
        raise bad("resolution")
    if meta["frozen_dtype"] not in LORA_FROZEN_DTYPES:
        raise bad("frozen_dtype")
    return meta


def _lora_for_backend(path: str | os.PathLike, backend: str) -> dict:
    """Read and check a LoRA file's metadata for `backend`, before any model is loaded."""
    from fourloops.io import sha256_file

    meta = read_lora_metadata(path)
    if meta["backend"] != backend:
        raise LoraFileError(
            f"LoRA file {os.fspath(path)!r} was trained for backend {meta['backend']!r} "
            f"(metadata {LORA_METADATA_KEY}.backend), but the generator loads backend {backend!r}; "
            f"use a LoRA trained on {backend!r}"
        )
    return {"path": str(os.fspath(path)), "sha256": sha256_file(path), "metadata": meta}


def _first(keys, n: int = 5) -> str:
    keys = sorted(keys)
    more = f" (and {len(keys) - n} more)" if len(keys) > n else ""
    return ", ".join(repr(k) for k in keys[:n]) + more


def _apply_lora(transformer, info: dict, dtype) -> dict:
    """Inject the LoRA of `info` into `transformer`, load every tensor of its file, check them; eval, no dropout.

    Returns the census of what was loaded (tensors, parameters, adapted modules, scaling)."""
    import torch
    from peft import LoraConfig, get_peft_model_state_dict, inject_adapter_in_model, set_peft_model_state_dict
    from peft.tuners.lora import LoraLayer
    from safetensors.torch import load_file

    path, meta = info["path"], info["metadata"]
    where = f"LoRA file {path!r}"
    tensors = load_file(path, device="cpu")
    if not tensors:
        raise LoraFileError(f"{where} holds no tensors")
    non_lora = [k for k in tensors if ".lora_A." not in k and ".lora_B." not in k]
    if non_lora:
        raise LoraFileError(f"{where} holds tensors that are not LoRA A/B weights: {_first(non_lora)}; "
                            "a camera LoRA holds peft.get_peft_model_state_dict(transformer) only")
    bad_values = [k for k, t in tensors.items() if not t.is_floating_point() or not bool(torch.isfinite(t).all())]
    if bad_values:
        raise LoraFileError(f"{where}: tensors {_first(bad_values)} are not finite floating-point values")

    config = LoraConfig(r=meta["rank"], lora_alpha=float(meta["alpha"]), lora_dropout=0.0,
                        target_modules=list(meta["target_modules"]))
    try:
        inject_adapter_in_model(config, transformer, adapter_name=LORA_ADAPTER_NAME)
    except ValueError as exc:  # peft: no module of the transformer matches the target modules
        raise LoraFileError(
            f"{where}: target_modules {meta['target_modules']} do not fit the transformer "
            f"{type(transformer).__name__}: {exc}"
        ) from exc
    layers = [m for m in transformer.modules() if isinstance(m, LoraLayer)]
    device = next(transformer.parameters()).device
    for layer in layers:  # the adapter at the generator's dtype, on the transformer's device
        layer.lora_A.to(device=device, dtype=dtype)
        layer.lora_B.to(device=device, dtype=dtype)

    expected = {k: tuple(v.shape) for k, v in
                get_peft_model_state_dict(transformer, adapter_name=LORA_ADAPTER_NAME).items()}
    missing = set(expected) - set(tensors)
    unexpected = set(tensors) - set(expected)
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"{len(missing)} LoRA tensor(s) the transformer expects are missing from the file: "
                         f"{_first(missing)}")
        if unexpected:
            parts.append(f"{len(unexpected)} tensor(s) in the file match no LoRA module of the transformer: "
                         f"{_first(unexpected)}")
        raise LoraFileError(
            f"{where} does not fit the {type(transformer).__name__} of this generator "
            f"(rank {meta['rank']}, target_modules {meta['target_modules']}, {len(expected)} LoRA tensors "
            f"expected, {len(tensors)} in the file): " + "; ".join(parts)
        )
    wrong_shape = {k: (tuple(tensors[k].shape), shape) for k, shape in expected.items()
                   if tuple(tensors[k].shape) != shape}
    if wrong_shape:
        k = sorted(wrong_shape)[0]
        raise LoraFileError(
            f"{where}: {len(wrong_shape)} tensor(s) have the wrong shape for rank {meta['rank']} on this "
            f"transformer, first {k!r}: {list(wrong_shape[k][0])} in the file, {list(wrong_shape[k][1])} expected"
        )

    result = set_peft_model_state_dict(transformer, tensors, adapter_name=LORA_ADAPTER_NAME)
    left = [k for k in result.missing_keys if "lora_" in k]
    if result.unexpected_keys or left:
        raise LoraFileError(f"{where}: peft loaded it partially (unexpected {_first(result.unexpected_keys)}; "
                            f"LoRA keys not loaded {_first(left)})")
    loaded = get_peft_model_state_dict(transformer, adapter_name=LORA_ADAPTER_NAME)
    differ = [k for k in tensors if not torch.equal(loaded[k].cpu(), tensors[k].to(dtype))]
    if differ:
        raise LoraFileError(f"{where}: after loading, the transformer's tensors {_first(differ)} differ from the file")

    transformer.eval()
    for name, param in transformer.named_parameters():
        if "lora_" in name:
            param.requires_grad_(False)
    return {
        "tensors": len(tensors),
        "parameters": int(sum(t.numel() for t in tensors.values())),
        "modules": len(layers),
        "scaling": float(meta["alpha"]) / meta["rank"],
        "dtype": str(dtype).removeprefix("torch."),
    }
