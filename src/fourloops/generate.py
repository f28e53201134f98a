"""Instruction-editing image generators behind one small interface.

A `generate` job loads ONE model with `load_backend` and then calls `Generator.generate` once per
requested azimuth. Every model, real or smoke, is loaded by `_from_pretrained` from a local
directory: a hub id is first resolved to its snapshot in the Hugging Face cache with
`local_files_only=True` (never a download), so the smoke set and the real weights share the same
code path. `LOADS` counts the calls of `_from_pretrained` in this process.

Backends:
  * "qwen_image_edit_plus": diffusers `QwenImageEditPlusPipeline` (real model
    Qwen/Qwen-Image-Edit-2509), which takes a list of reference images.
  * "omnigen2": `OmniGen2Pipeline` from the OmniGen2 package (github VectorSpaceLab/OmniGen2),
    imported only when that backend is asked for.

A camera-control LoRA (`results/lora/{name}.safetensors`, written by the LoRA training stage) is
loaded with `load_backend(..., lora=path)`: its tensors are `peft.get_peft_model_state_dict` of the
pipeline's `transformer` (LoRA A/B only, adapter name stripped), its safetensors metadata key
`fourloops.lora` holds the JSON the adapter is rebuilt from (see `LORA_METADATA_FIELDS`). The adapter
is injected with `peft.inject_adapter_in_model` (plain torch modules: diffusers' QwenImage transformer
and OmniGen2's transformer alike), unmerged, and every one of its tensors is checked loaded.

torch, diffusers and transformers are imported lazily, so importing this module (for `BACKENDS`,
e.g. in the config validator) is cheap.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import os
import re
from pathlib import Path
from typing import Any

from fourloops.backends import BACKENDS  # noqa: E402  (names live where the workflow reads them without torch)
PRECISIONS = ("fp32", "bf16", "nf4")
REQUIRED_SETTINGS = ("num_inference_steps", "guidance", "width", "height", "negative_prompt")
# Optional settings a backend understands beyond the required ones.
OPTIONAL_SETTINGS = {
    "qwen_image_edit_plus": ("max_sequence_length",),
    "omnigen2": ("image_guidance_scale", "max_sequence_length"),
}

# The OmniGen2 commit the adapter was written against (github VectorSpaceLab/OmniGen2, 2025-07-05).
OMNIGEN2_REPO = "https://github.com/VectorSpaceLab/OmniGen2"
OMNIGEN2_COMMIT = "0f72fa92564d9f8ba76f53fcc3c05aca2372458f"
OMNIGEN2_INSTALL_HINT = (
    f"install it in the pod environment from its git repository at a pinned commit: "
    f"`git clone {OMNIGEN2_REPO} /opt/OmniGen2 && git -C /opt/OmniGen2 checkout {OMNIGEN2_COMMIT}` and put "
    f"/opt/OmniGen2 on PYTHONPATH (at that commit the repository has no setup.py/pyproject.toml, so "
    f"`pip install git+{OMNIGEN2_REPO}@{OMNIGEN2_COMMIT}` cannot build it; add a pyproject or a .pth file "
    f"if it must be pip-installed); its requirements.txt also wants timm, einops, accelerate, omegaconf"
)

# Set in a rented pod's environment by the RunPod executor: there, a hub model missing from the cache is
# downloaded once (the pod's container disk keeps it across jobs). Nowhere else does anything download.
FETCH_ENV = "FOURLOOPS_FETCH_MODELS"

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

log = logging.getLogger(__name__)

# Process-level count of model loads (calls of `_from_pretrained`); a job must add exactly one.
LOADS = 0


class GeneratorUnavailable(RuntimeError):
    """The generator cannot be loaded in this environment (missing package, weights or device)."""


class ModelNotCached(GeneratorUnavailable):
    """A hub id was asked for whose snapshot is not in the local Hugging Face cache."""


class LoraFileError(ValueError):
    """A LoRA file that cannot be loaded into this generator (metadata, backend, keys, shapes or values)."""


# ---------------------------------------------------------------------------------------------
# validation


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown generator backend {backend!r}; allowed backends: {', '.join(BACKENDS)}")


def _check_settings(backend: str, settings: dict) -> dict:
    if not isinstance(settings, dict):
        raise ValueError(f"generator settings must be a dict, got {type(settings).__name__}")
    missing = [k for k in REQUIRED_SETTINGS if k not in settings]
    if missing:
        raise ValueError(f"generator settings lack {missing}; required: {list(REQUIRED_SETTINGS)}")
    allowed = set(REQUIRED_SETTINGS) | set(OPTIONAL_SETTINGS[backend])
    unknown = sorted(set(settings) - allowed)
    if unknown:
        raise ValueError(f"unknown generator settings {unknown} for backend {backend!r}; allowed: {sorted(allowed)}")
    out = dict(settings)
    for key in ("num_inference_steps", "width", "height"):
        value = out[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"generator setting {key!r} must be a positive int, got {value!r}")
    if out["width"] % 16 or out["height"] % 16:
        raise ValueError(f"generator width/height must be multiples of 16, got {out['width']}x{out['height']}")
    if isinstance(out["guidance"], bool) or not isinstance(out["guidance"], (int, float)):
        raise ValueError(f"generator setting 'guidance' must be a number, got {out['guidance']!r}")
    out["guidance"] = float(out["guidance"])
    if out["negative_prompt"] is not None and not isinstance(out["negative_prompt"], str):
        raise ValueError("generator setting 'negative_prompt' must be a string or null")
    return out


def _check_device(precision: str, device: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; allowed: {', '.join(PRECISIONS)}")
    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise ValueError(f"unsupported device {device!r}; use 'cpu', 'cuda' or 'cuda:N'")
    if precision == "nf4" and not device.startswith("cuda"):
        raise ValueError(
            f"precision 'nf4' (bitsandbytes 4-bit) needs a CUDA device, got device {device!r}; "
            "use precision 'fp32' or 'bf16' on CPU"
        )
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise GeneratorUnavailable(f"device {device!r} asked for, but torch sees no CUDA device here")


# ---------------------------------------------------------------------------------------------
# model resolution


def _looks_like_path(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or os.sep + os.sep in model or model.count("/") > 1


def resolve_model(model: str, revision: str | None) -> tuple[Path, dict]:
    """Return (local directory, provenance) for a local directory or a cached hub id (no download)."""
    path = Path(model).expanduser()
    if path.exists() or _looks_like_path(model):
        if not path.is_dir():
            raise GeneratorUnavailable(f"model directory {str(path)!r} does not exist (or is not a directory)")
        if revision is not None:
            raise ValueError(f"revision {revision!r} was given for the local model directory {model!r}; "
                             "a revision applies to hub ids only")
        return path.resolve(), {"source": "local_dir"}

    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        snapshot = snapshot_download(model, revision=revision, local_files_only=True)
    except HFValidationError as exc:
        raise ValueError(f"model {model!r} is neither an existing directory nor a valid hub id: {exc}") from exc
    except (LocalEntryNotFoundError, FileNotFoundError, OSError) as exc:
        if os.environ.get(FETCH_ENV) == "1":  # a rented pod: download once into its own cache
            snapshot = snapshot_download(model, revision=revision)
            snapshot_path = Path(snapshot)
            return snapshot_path, {"source": "hub_download", "resolved_revision": snapshot_path.name}
        raise ModelNotCached(
            f"model {model!r} at revision {revision or 'main'!r} is not in the local Hugging Face cache "
            f"(HF_HOME={constants.HF_HOME!r}, hub cache {constants.HF_HUB_CACHE!r}); nothing is downloaded "
            f"at run time: pre-fetch it into that cache (e.g. `hf download {model}"
            f"{' --revision ' + revision if revision else ''}` where the network is allowed) or point "
            f"`model` at a local directory"
        ) from exc
    snapshot_path = Path(snapshot)
    return snapshot_path, {"source": "hub_cache", "resolved_revision": snapshot_path.name}


def local_dir_digest(root: Path) -> str:
    """sha256 over (relative path, size, sha256) of every non-hidden file under `root`, sorted."""
    from fourloops.io import sha256_file

    digest = hashlib.sha256()
    files = sorted(
        p for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
    for p in files:
        rel = p.relative_to(root).as_posix()
        digest.update(f"{rel}\t{p.stat().st_size}\t{sha256_file(p)}\n".encode())
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------
# loading


def _torch_dtype(precision: str):
    import torch

    return torch.float32 if precision == "fp32" else torch.bfloat16


def _bnb_available() -> None:
    try:
        import bitsandbytes  # noqa: F401
    except ImportError as exc:
        raise GeneratorUnavailable(
            "precision 'nf4' needs the bitsandbytes package (pip install bitsandbytes) in the pod environment"
        ) from exc


def _import_omnigen2():
    try:
        from omnigen2.models.transformers.transformer_omnigen2 import OmniGen2Transformer2DModel
        from omnigen2.pipelines.omnigen2.pipeline_omnigen2 import OmniGen2Pipeline
        # A saved pipeline names its scheduler by this module; diffusers loads it only once imported.
        import omnigen2.schedulers.scheduling_flow_match_euler_discrete  # noqa: F401
    except ImportError as exc:
        raise GeneratorUnavailable(
            f"backend 'omnigen2' needs the OmniGen2 package (python module `omnigen2`, {OMNIGEN2_REPO}), "
            f"which cannot be imported here ({exc}); {OMNIGEN2_INSTALL_HINT}"
        ) from exc
    return OmniGen2Pipeline, OmniGen2Transformer2DModel


# NF4 with double quantisation (the absmax tables quantised too) per backend; config/models.yaml's `nf4_format`
# says the same (tests/test_asks.py holds them equal). OmniGen2: transformer + MLLM at double-quant NF4 weigh
# 1.921 + 2.249 GiB, with the bf16 VAE 4.33 GiB = the desk's NF4 figure (RFD 1163); plain NF4 weighs 4.68
# (bench/results/omnigen2_gpu-h200-2026-12-01.jsonl).
NF4_DOUBLE_QUANT = {"omnigen2": True, "qwen_image_edit_plus": False}


def _nf4_kwargs(backend: str) -> dict:
    import torch

    return {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_compute_dtype": torch.bfloat16,
            "bnb_4bit_use_double_quant": NF4_DOUBLE_QUANT[backend]}


def _pipeline_nf4(backend: str, components: list[str]):
    from diffusers import PipelineQuantizationConfig

    return PipelineQuantizationConfig(quant_backend="bitsandbytes_4bit", quant_kwargs=_nf4_kwargs(backend),
                                      components_to_quantize=components)


def _from_pretrained(backend: str, path: Path, precision: str):
    """The one place that calls `from_pretrained`; counts itself in `LOADS`."""
    global LOADS
    import torch

    dtype = _torch_dtype(precision)
    common = {"dtype": dtype, "local_files_only": True}
    if backend == "qwen_image_edit_plus":
        from diffusers import QwenImageEditPlusPipeline

        if precision == "nf4":
            common["quantization_config"] = _pipeline_nf4(backend, ["transformer", "text_encoder"])
        LOADS += 1
        return QwenImageEditPlusPipeline.from_pretrained(str(path), **common)

    if backend == "omnigen2":
        OmniGen2Pipeline, OmniGen2Transformer2DModel = _import_omnigen2()
        transformer_kwargs = dict(common)
        if precision == "nf4":
            from diffusers import BitsAndBytesConfig

            transformer_kwargs["quantization_config"] = BitsAndBytesConfig(**_nf4_kwargs(backend))
            # The MLLM (Qwen2.5-VL-3B, 6.99 GiB bf16) too: left bf16 it held 7 of the 10.02 GiB peak (H200)
            common["quantization_config"] = _pipeline_nf4(backend, ["mllm"])
        LOADS += 1
        # As OmniGen2's inference.py does: the transformer comes from the package's own class.
        transformer = OmniGen2Transformer2DModel.from_pretrained(str(path), subfolder="transformer",
                                                                 **transformer_kwargs)
        return OmniGen2Pipeline.from_pretrained(str(path), transformer=transformer, trust_remote_code=True,
                                                **common)
    raise AssertionError(backend)


# ---------------------------------------------------------------------------------------------
# the camera LoRA


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


class Generator:
    """One loaded model; `generate` makes one view, `describe` says what was loaded."""

    def __init__(self, backend: str, model: str, path: Path, provenance: dict, precision: str, device: str,
                 settings: dict, pipe, lora: dict | None = None) -> None:
        self.backend = backend
        self.model = model
        self.path = path
        self.provenance = provenance
        self.precision = precision
        self.device = device
        self.settings = settings
        self.pipe = pipe
        self.lora = lora  # None, or the loaded LoRA: path, sha256, metadata and its census
        self._describe: dict | None = None

    # -- generation ---------------------------------------------------------------------------
    def generate(self, images: list, prompt: str, seed: int):
        """Return one RGB PIL image of settings width x height for `prompt` given reference `images`."""
        import PIL.Image
        import torch

        if not isinstance(images, (list, tuple)) or not images:
            raise ValueError("generate needs a non-empty list of reference PIL images")
        if not all(isinstance(im, PIL.Image.Image) for im in images):
            raise ValueError("every reference image must be a PIL.Image.Image")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("generate needs a non-empty prompt")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {seed!r}")
        refs = [im.convert("RGB") for im in images]
        # A CPU generator: the initial noise is drawn on the CPU, so a seed means the same noise on every device.
        generator = torch.Generator(device="cpu").manual_seed(seed)
        s = self.settings
        if self.backend == "qwen_image_edit_plus":
            negative = s["negative_prompt"]
            if negative is None and s["guidance"] > 1.0:
                negative = " "  # the pipeline runs true CFG only with a negative prompt; " " as in its docs
            kwargs: dict[str, Any] = {
                "image": refs, "prompt": prompt, "negative_prompt": negative, "true_cfg_scale": s["guidance"],
                "width": s["width"], "height": s["height"], "num_inference_steps": s["num_inference_steps"],
                "generator": generator, "output_type": "pil",
            }
            if "max_sequence_length" in s:
                kwargs["max_sequence_length"] = s["max_sequence_length"]
        else:  # omnigen2
            kwargs = {
                "prompt": prompt, "input_images": refs, "negative_prompt": s["negative_prompt"],
                "text_guidance_scale": s["guidance"], "image_guidance_scale": s.get("image_guidance_scale", 2.0),
                "width": s["width"], "height": s["height"], "num_inference_steps": s["num_inference_steps"],
                "max_sequence_length": s.get("max_sequence_length", 1024), "num_images_per_prompt": 1,
                # align_res=True would make a single-reference output take the reference's size
                "align_res": False, "generator": generator, "output_type": "pil",
            }
        with torch.inference_mode():
            result = self.pipe(**kwargs)
        image = result.images[0].convert("RGB")
        if image.size != (s["width"], s["height"]):
            raise RuntimeError(
                f"{self.backend} returned a {image.size[0]}x{image.size[1]} image, settings ask for "
                f"{s['width']}x{s['height']} (the model's size granularity may not divide them)"
            )
        return image

    # -- provenance ---------------------------------------------------------------------------
    def describe(self) -> dict:
        if self._describe is None:
            import diffusers
            import torch

            params: dict[str, int] = {}
            for name, component in self.pipe.components.items():
                if isinstance(component, torch.nn.Module):
                    params[name] = int(sum(p.numel() for p in component.parameters()))
            if self.provenance["source"] == "hub_cache":
                revision, revision_kind = self.provenance["resolved_revision"], "hub_commit"
            else:
                revision, revision_kind = local_dir_digest(self.path), "local_dir_sha256"
            model_index = self.path / "model_index.json"
            class_name = None
            if model_index.is_file():
                from fourloops.io import read_json

                class_name = read_json(model_index).get("_class_name")
            self._describe = {
                "backend": self.backend,
                "model": self.model,
                "model_path": str(self.path),
                "model_source": self.provenance["source"],
                "revision": revision,
                "revision_kind": revision_kind,
                "precision": self.precision,
                "device": self.device,
                "pipeline_class": f"{type(self.pipe).__module__}.{type(self.pipe).__qualname__}",
                "model_index_class": class_name,
                "parameters": int(sum(params.values())),
                "parameters_by_component": params,
                "settings": dict(self.settings),
                "torch": torch.__version__,
                "diffusers": diffusers.__version__,
                "lora": None if self.lora is None else copy.deepcopy(self.lora),
            }
        return dict(self._describe)


def load_backend(backend: str, model: str, revision: str | None, precision: str, device: str,
                 settings: dict, lora: str | os.PathLike | None = None) -> Generator:
    """Load `model` for `backend` once; return a Generator to call per view.

    `model` is a local directory or a hub id; a hub id is read from the local Hugging Face cache
    only (`local_files_only=True`), and `revision` (hub ids only) picks the snapshot. `precision` is
    "fp32", "bf16" or "nf4" (bitsandbytes 4-bit; CUDA only). `settings` holds num_inference_steps,
    guidance (true_cfg_scale for Qwen, text_guidance_scale for OmniGen2), width, height and
    negative_prompt.

    `lora` (optional) is a camera LoRA file (see `LORA_METADATA_FIELDS`): its metadata is checked
    (backend included) before the model loads; then it is injected into the pipeline's transformer,
    unmerged, at the generator's dtype, and every tensor of the file must load (`LoraFileError`
    otherwise). `describe()["lora"]` records it (path, sha256, metadata, census), None without one.
    """
    _check_backend(backend)
    settings = _check_settings(backend, settings)
    _check_device(precision, device)
    lora_info = _lora_for_backend(lora, backend) if lora is not None else None
    if backend == "omnigen2":
        _import_omnigen2()  # fail early, before touching the model, when the package is missing
    if precision == "nf4":
        _bnb_available()
    path, provenance = resolve_model(model, revision)
    pipe = _from_pretrained(backend, path, precision)
    pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    if backend == "qwen_image_edit_plus":
        multiple = pipe.vae_scale_factor * 2
        if settings["width"] % multiple or settings["height"] % multiple:
            raise ValueError(
                f"width/height {settings['width']}x{settings['height']} must be multiples of {multiple} "
                f"for the model at {str(path)!r}"
            )
    if lora_info is not None:
        base = lora_info["metadata"]["base_model"]
        if base not in (model, str(path)):
            log.warning("LoRA %s was trained on base model %r; this generator loads %r (%s)",
                        lora_info["path"], base, model, path)
        lora_info.update(_apply_lora(pipe.transformer, lora_info, _torch_dtype(precision)))
    return Generator(backend, model, path, provenance, precision, device, settings, pipe, lora_info)
