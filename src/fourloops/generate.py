"""Instruction-editing image generators behind one small interface: inference.

A `generate` job loads ONE model with `load_backend` and then calls `Generator.generate` once per
requested azimuth. Every model, real or smoke, is loaded by `fourloops.loading._from_pretrained` from a
local directory: a hub id is first resolved to its snapshot in the Hugging Face cache by
`fourloops.hub.resolve_model` (never a download), so the smoke set and the real weights share the same
code path.

Backends:
  * "qwen_image_edit_plus": diffusers `QwenImageEditPlusPipeline` (real model
    Qwen/Qwen-Image-Edit-2509), which takes a list of reference images.
  * "omnigen2": `OmniGen2Pipeline` from the OmniGen2 package (github VectorSpaceLab/OmniGen2),
    imported only when that backend is asked for.

A camera-control LoRA (`results/lora/{name}.safetensors`, written by the LoRA training stage; its format
is `fourloops.lora_file`) is loaded with `load_backend(..., lora=path)`, unmerged.

The hub resolution, the loading and the LoRA file live in modules of their own, which the LoRA stages
import too: an edit here (inference) makes generate and restyle stale, never the LoRA's records,
embeddings or training.

torch, diffusers and transformers are imported lazily, so importing this module is cheap.
"""

from __future__ import annotations

import copy
import logging
import os
import re
from pathlib import Path
from typing import Any

from fourloops import loading
from fourloops.backends import BACKENDS, MAX_BATCH
from fourloops.hub import GeneratorUnavailable, local_dir_digest, resolve_model
from fourloops.lora_file import _apply_lora, _lora_for_backend

PRECISIONS = ("fp32", "bf16", "nf4")
REQUIRED_SETTINGS = ("num_inference_steps", "guidance", "width", "height", "negative_prompt")
# Optional settings a backend understands beyond the required ones.
OPTIONAL_SETTINGS = {
    "qwen_image_edit_plus": ("max_sequence_length",),
    "omnigen2": ("image_guidance_scale", "max_sequence_length"),
}

log = logging.getLogger(__name__)


def _image_key(image) -> str:
    """A reference image by its pixels: the same image is encoded once a job, whichever view names it."""
    import hashlib

    return hashlib.sha256(image.mode.encode() + repr(image.size).encode() + image.tobytes()).hexdigest()


def _omnigen2_encode(pipe, pixels, generator):
    """OmniGen2Pipeline.encode_vae with the posterior's sample drawn from `generator`."""
    vae = pipe.vae
    z0 = vae.encode(pixels.to(dtype=vae.dtype)).latent_dist.sample(generator=generator)
    if vae.config.shift_factor is not None:
        z0 = z0 - vae.config.shift_factor
    if vae.config.scaling_factor is not None:
        z0 = z0 * vae.config.scaling_factor
    return z0.to(dtype=vae.dtype)


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
        # what a job computes once for all its views: each prompt's text encoding, each reference's latents
        self._text_embeds: dict = {}
        self._reference_latents: dict = {}

    # -- generation ---------------------------------------------------------------------------
    def max_batch(self) -> int:
        """The most views one pipeline call makes: OmniGen2 takes a list of prompts, each with its own references;
        diffusers' Qwen-Image-Edit-Plus pipeline refuses more than one prompt a call."""
        return MAX_BATCH[self.backend]

    def generate(self, images: list, prompt: str, seed: int, job_seed: int | None = None):
        """Return one RGB PIL image of settings width x height for `prompt` given reference `images`."""
        return self.generate_batch([(images, prompt, seed)], job_seed=seed if job_seed is None else job_seed)[0]

    def text_length(self, prompts: list[str]) -> int | None:
        """The longest of `prompts` as the text encoder reads them (tokens), for `generate_batch(pad_to=)`; None for
        a backend that takes one prompt a call."""
        if self.backend != "omnigen2":
            return None
        max_len = self.settings.get("max_sequence_length", 1024)
        return max(int(self._omnigen2_text(p, max_len)[0].shape[1]) for p in prompts)

    def generate_batch(self, items: list[tuple[list, str, int]], job_seed: int, pad_to: int | None = None) -> list:
        """One pipeline call makes a view per (reference images, prompt, seed) of `items`: each view's initial
        noise from its own seed, each reference image's encode from `job_seed` and the image, the text through
        the encoder one prompt at a time and padded to `pad_to` tokens (a job passes its longest prompt's,
        `text_length`, to every call), so that a view's sequence is the same whatever else is in its call."""
        import PIL.Image

        if not items:
            raise ValueError("generate_batch needs at least one view")
        if len(items) > self.max_batch():
            raise ValueError(f"backend {self.backend!r} makes at most {self.max_batch()} view(s) a call, "
                             f"asked for {len(items)}")
        for images, prompt, seed in items:
            if not isinstance(images, (list, tuple)) or not images:
                raise ValueError("generate needs a non-empty list of reference PIL images")
            if not all(isinstance(im, PIL.Image.Image) for im in images):
                raise ValueError("every reference image must be a PIL.Image.Image")
            if not isinstance(prompt, str) or not prompt.strip():
                raise ValueError("generate needs a non-empty prompt")
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise ValueError(f"seed must be an int, got {seed!r}")
        s = self.settings
        if self.backend == "qwen_image_edit_plus":
            out = [self._qwen_one([im.convert("RGB") for im in images], prompt, seed) for images, prompt, seed in items]
        else:
            out = self._omnigen2_batch(items, int(job_seed), pad_to)
        images = [im.convert("RGB") for im in out]
        for image in images:
            if image.size != (s["width"], s["height"]):
                raise RuntimeError(
                    f"{self.backend} returned a {image.size[0]}x{image.size[1]} image, settings ask for "
                    f"{s['width']}x{s['height']} (the model's size granularity may not divide them)"
                )
        return images

    def _qwen_one(self, refs: list, prompt: str, seed: int):
        import torch

        s = self.settings
        negative = s["negative_prompt"]
        if negative is None and s["guidance"] > 1.0:
            negative = " "  # the pipeline runs true CFG only with a negative prompt; " " as in its docs
        # A CPU generator: the initial noise is drawn on the CPU, so a seed means the same noise on every device.
        kwargs: dict[str, Any] = {
            "image": refs, "prompt": prompt, "negative_prompt": negative, "true_cfg_scale": s["guidance"],
            "width": s["width"], "height": s["height"], "num_inference_steps": s["num_inference_steps"],
            "generator": torch.Generator(device="cpu").manual_seed(seed), "output_type": "pil",
        }
        if "max_sequence_length" in s:
            kwargs["max_sequence_length"] = s["max_sequence_length"]
        with torch.inference_mode():
            return self.pipe(**kwargs).images[0]

    def _omnigen2_batch(self, items: list, job_seed: int, pad_to: int | None = None) -> list:
        import torch

        from fourloops import determinism

        s = self.settings
        pipe = self.pipe
        max_len = s.get("max_sequence_length", 1024)
        with torch.inference_mode():
            embeds = [self._omnigen2_text(prompt, max_len) for _, prompt, _ in items]
            negative = self._omnigen2_text(s["negative_prompt"] or "", max_len)
            prompt_embeds, prompt_mask = loading.right_padded(embeds, pad_to)
            neg_embeds = negative[0].repeat(len(items), 1, 1)
            neg_mask = negative[1].repeat(len(items), 1)
            refs = [[im.convert("RGB") for im in images] for images, _, _ in items]
            cache = self._reference_latents
            seed_of = job_seed

            def prepare_image(images, batch_size, num_images_per_prompt, max_pixels, max_side_length, device, dtype):
                """The pipeline's own reference preparation, each distinct image encoded once a job with a generator
                of its own (the pipeline's encode samples the VAE posterior from the global generator)."""
                per_view = [images] if batch_size == 1 else images
                out = []
                for view_images in per_view:
                    latents = []
                    for img in view_images:
                        key = (seed_of, max_pixels, max_side_length, _image_key(img))
                        if key not in cache:
                            px = pipe.image_processor.preprocess(img, max_pixels=max_pixels,
                                                                 max_side_length=max_side_length)
                            gen = determinism.generator(seed_of, "reference", key[3])
                            cache[key] = _omnigen2_encode(pipe, px.to(device=device), gen).squeeze(0)
                        latents.append(cache[key])
                    out.extend([latents] * num_images_per_prompt)
                return out

            pipe.prepare_image = prepare_image
            try:
                result = pipe(
                    prompt=[prompt for _, prompt, _ in items],
                    prompt_embeds=prompt_embeds, prompt_attention_mask=prompt_mask,
                    negative_prompt_embeds=neg_embeds, negative_prompt_attention_mask=neg_mask,
                    input_images=refs[0] if len(items) == 1 else refs,
                    text_guidance_scale=s["guidance"], image_guidance_scale=s.get("image_guidance_scale", 2.0),
                    width=s["width"], height=s["height"], num_inference_steps=s["num_inference_steps"],
                    max_sequence_length=max_len, num_images_per_prompt=1,
                    # align_res=True would make a single-reference output take the reference's size
                    align_res=False,
                    # a CPU generator per view: the same noise on every device, and whatever else is in the call
                    generator=[torch.Generator(device="cpu").manual_seed(seed) for _, _, seed in items],
                    output_type="pil",
                )
            finally:
                del pipe.prepare_image  # back to the class's method
        return list(result.images)

    def _omnigen2_text(self, prompt: str, max_len: int):
        """A prompt through OmniGen2's MLLM alone (a batch of one), as the pipeline encodes it; kept for the job.
        Under inference mode wherever it is called from (`text_length` is called outside any): an encoding made with
        autograd on would keep the MLLM's activations for a backward that never comes, a prompt's worth of them for
        every prompt the job keeps."""
        import torch

        key = (prompt, max_len)
        if key not in self._text_embeds:
            pipe = self.pipe
            templated = pipe._apply_chat_template(prompt)
            with torch.inference_mode():
                self._text_embeds[key] = pipe._get_qwen2_prompt_embeds(
                    prompt=[templated], device=pipe._execution_device, max_sequence_length=max_len)
        return self._text_embeds[key]

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

    `lora` (optional) is a camera LoRA file (see `fourloops.lora_file.LORA_METADATA_FIELDS`): its metadata is checked
    (backend included) before the model loads; then it is injected into the pipeline's transformer,
    unmerged, at the generator's dtype, and every tensor of the file must load (`LoraFileError`
    otherwise). `describe()["lora"]` records it (path, sha256, metadata, census), None without one.
    """
    _check_backend(backend)
    settings = _check_settings(backend, settings)
    _check_device(precision, device)
    lora_info = _lora_for_backend(lora, backend) if lora is not None else None
    if backend == "omnigen2":
        loading._import_omnigen2()  # fail early, before touching the model, when the package is missing
    if precision == "nf4":
        loading._bnb_available()
    path, provenance = resolve_model(model, revision)
    pipe = loading._from_pretrained(backend, path, precision)
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
        lora_info.update(_apply_lora(pipe.transformer, lora_info, loading._torch_dtype(precision)))
    return Generator(backend, model, path, provenance, precision, device, settings, pipe, lora_info)
