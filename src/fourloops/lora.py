"""The camera LoRA's training (its records: fourloops.lora_records; its embeddings: fourloops.lora_embeddings; its
file: fourloops.lora_file, so an edit here makes only the training stale).

Three jobs, three processes (rules/lora.smk):
  * records: ordered pairs of distinct record azimuths (source view -> target view), drawn once with a
    seed, each with the instruction naming the target azimuth;
  * embeddings: the instruction embeddings from the generator's own text encoder (the pipeline's
    `encode_prompt`; for Qwen-Image-Edit the encoder also sees the source view, as the pipeline does),
    the generator's transformer and VAE not loaded;
  * training: the frozen transformer (bf16, or fp32 under bf16 autocast on CUDA) and the VAE, never the
    text encoder (unless `text_encoder: resident` asks for the seeds' setup), a peft LoRA on the attention
    projections, the backend's rectified-flow objective, batch 1 x accumulation, checkpoints to resume from.

The flow-matching objective, per backend:
  * qwen_image_edit_plus (diffusers QwenImageTransformer2DModel, FlowMatchEulerDiscreteScheduler): sigma in
    (0, 1), x_t = (1 - sigma) x0 + sigma noise, the transformer is called with timestep = sigma and predicts
    noise - x0 (the scheduler's step is x + (sigma_next - sigma) v). The source view's latents are packed
    after the noisy target's, with both shapes in img_shapes, and only the target's tokens are scored, as
    the pipeline's denoising loop reads them.
  * omnigen2 (its train.py and transport, ICPlan): t in (0, 1), x_t = t x0 + (1 - t) noise, the
    transformer predicts x0 - noise; the source view enters as ref_image_hidden_states.
Timesteps are uniform in (0, 1) (OmniGen2 trains lognormal with a time shift; not reproduced here).

The saved LoRA (a contract with the generator's loader): exactly `peft.get_peft_model_state_dict(transformer)`
and the safetensors metadata key `fourloops.lora` (`fourloops.lora_file`, which owns the format) = JSON with rank,
alpha, dropout, target_modules, backend, base_model, model_set, steps, resolution, frozen_dtype.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from fourloops.io import atomic_dir, atomic_path, read_json, sha256_file, write_json
from fourloops.loading import _import_omnigen2, _torch_dtype, right_padded
from fourloops.lora_embeddings import EMBEDDINGS_META_KEY
from fourloops.lora_file import LORA_FROZEN_DTYPES, LORA_METADATA_KEY, LORA_TARGET_MODULES
from fourloops.lora_records import LoraError, read_records

CHECKPOINT_PREFIX = "step-"
BITSANDBYTES_PIN = "bitsandbytes==0.50.2"  # envs/pod.txt
# Keys of the training config that do not change what a step computes: a resume may differ in them.
RESUMABLE_KEYS = ("checkpoint_every",)


# ------------------------------------------------------------------------------------ the model files
def _configs(path: Path, backend: str) -> tuple[dict, dict]:
    try:
        return read_json(path / "transformer" / "config.json"), read_json(path / "vae" / "config.json")
    except FileNotFoundError as exc:
        raise LoraError(f"generator.model: {path} has no transformer/ or vae/ config ({exc.filename}); allowed: "
                        f"a {backend} pipeline directory (save_pretrained layout)") from None


def resolution_multiple(backend: str, transformer_cfg: dict, vae_cfg: dict) -> tuple[int, str]:
    """The side a training image must be a multiple of: the transformer's patch x the VAE's factor."""
    patch = int(transformer_cfg.get("patch_size", 2))
    if backend == "qwen_image_edit_plus":  # the pipeline's vae_scale_factor
        factor = 2 ** len(vae_cfg["temperal_downsample"])
    elif backend == "omnigen2":
        factor = 2 ** (len(vae_cfg["block_out_channels"]) - 1)
    else:
        raise LoraError(f"generator.backend = {backend!r}: no LoRA training for it; allowed: qwen_image_edit_plus, omnigen2")
    return patch * factor, f"patch {patch} x VAE factor {factor}"


def check_resolution(backend: str, path: Path, resolution: int) -> int:
    multiple, why = resolution_multiple(backend, *_configs(path, backend))
    if int(resolution) % multiple:
        raise LoraError(f"lora.resolution = {resolution}: the {backend} model at {path} cannot take it; allowed: a "
                        f"multiple of {multiple} ({why}, from its transformer and vae config.json)")
    return multiple


def target_names(module) -> list[str]:
    """The peft target names a module's Linear layers answer to (last name, or the last two for `to_out.0`)."""
    import torch

    out = set()
    for name, m in module.named_modules():
        if isinstance(m, torch.nn.Linear) and name:
            parts = name.split(".")
            out.add(".".join(parts[-2:]) if parts[-1].isdigit() and len(parts) > 1 else parts[-1])
    return sorted(out)


def check_targets(transformer, targets: list[str], backend: str) -> int:
    """Every target names a Linear layer of the transformer (peft's suffix rule); returns how many it wraps."""
    import torch

    linear = [n for n, m in transformer.named_modules() if isinstance(m, torch.nn.Linear)]
    unknown, wrapped = [], 0
    for t in targets:
        hits = [n for n in linear if n == t or n.endswith("." + t)]
        if not hits:
            unknown.append(t)
        wrapped += len(hits)
    if unknown:
        raise LoraError(f"lora.target_modules = {list(targets)}: {unknown} name no Linear layer of the {backend} "
                        f"transformer; allowed: names among {target_names(transformer)}")
    return wrapped


# ----------------------------------------------------------------------------------------- images
def load_image(path: str, size: int):
    from PIL import Image

    with Image.open(path) as im:
        return im.convert("RGB").resize((size, size), Image.Resampling.LANCZOS)


def _pixels(image):
    """PIL RGB -> (1, 3, H, W) float in [-1, 1]."""
    import numpy as np
    import torch

    arr = np.asarray(image, dtype=np.float32) / 127.5 - 1.0
    return torch.from_numpy(arr).permute(2, 0, 1).unsqueeze(0).contiguous()


# ---------------------------------------------------------------------------------------- training
@dataclass(frozen=True)
class TrainSpec:
    backend: str
    model: str
    revision: str | None
    model_set: str
    rank: int
    alpha: float
    dropout: float
    target_modules: tuple[str, ...]
    steps: int
    lr: float
    weight_decay: float
    max_grad_norm: float
    resolution: int
    accumulation: int  # samples per optimizer step (the effective batch)
    frozen_dtype: str
    text_encoder: str
    device: str
    seed: int
    checkpoint_every: int
    micro_batch: object = 1  # samples a forward: a number, or auto (the job's `batch` resource then says how many)

    @classmethod
    def of(cls, **kw) -> "TrainSpec":
        kw["target_modules"] = tuple(kw["target_modules"])
        spec = cls(**kw)
        spec.check()
        return spec

    def check(self) -> None:
        """What the schema says, again, for callers that do not come through the config."""
        for key, value, ok, allowed in (
            ("rank", self.rank, isinstance(self.rank, int) and self.rank >= 1, "a whole number >= 1"),
            ("accumulation", self.accumulation, isinstance(self.accumulation, int) and self.accumulation >= 1,
             "a whole number >= 1"),
            ("micro_batch", self.micro_batch, self.micro_batch == "auto" or (
                isinstance(self.micro_batch, int) and not isinstance(self.micro_batch, bool) and self.micro_batch >= 1),
             "'auto' or a whole number >= 1"),
            ("steps", self.steps, isinstance(self.steps, int) and self.steps >= 1, "a whole number >= 1"),
            ("checkpoint_every", self.checkpoint_every, self.checkpoint_every >= 1, "a whole number >= 1"),
            ("alpha", self.alpha, self.alpha > 0, "a number > 0"),
            ("dropout", self.dropout, 0 <= self.dropout < 1, "a number >= 0 and < 1"),
            ("lr", self.lr, self.lr > 0, "a number > 0"),
            ("frozen_dtype", self.frozen_dtype, self.frozen_dtype in LORA_FROZEN_DTYPES,
             f"one of {list(LORA_FROZEN_DTYPES)}"),
            ("text_encoder", self.text_encoder, self.text_encoder in ("precomputed", "resident"),
             "one of ['precomputed', 'resident']"),
            ("target_modules", list(self.target_modules),
             len(self.target_modules) >= 1 and set(self.target_modules) <= set(LORA_TARGET_MODULES),
             f"at least one of {list(LORA_TARGET_MODULES)} (the modules the generator's LoRA reader loads)"),
        ):
            if not ok:
                raise LoraError(f"lora.{key} = {value!r}: not allowed; allowed: {allowed}")

    def fingerprint(self, records_sha256: str, embeddings_sha256: str) -> dict:
        """What a resume must share with the run it continues (checkpoint_every may differ)."""
        d = {k: v for k, v in asdict(self).items() if k not in RESUMABLE_KEYS}
        d["target_modules"] = list(self.target_modules)
        return {**d, "records_sha256": records_sha256, "embeddings_sha256": embeddings_sha256}

    def metadata(self) -> dict:
        """The `fourloops.lora` metadata of the saved file (the loader's contract)."""
        return {"rank": int(self.rank), "alpha": float(self.alpha), "dropout": float(self.dropout),
                "target_modules": list(self.target_modules), "backend": self.backend, "base_model": self.model,
                "model_set": self.model_set, "steps": int(self.steps), "resolution": int(self.resolution),
                "frozen_dtype": self.frozen_dtype}


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def latest_checkpoint(directory: str | Path) -> Path | None:
    """The newest complete checkpoint (atomic_dir puts only finished ones in place)."""
    root = Path(directory)
    done = sorted(p for p in root.glob(CHECKPOINT_PREFIX + "*") if p.is_dir() and (p / "state.json").is_file())
    return done[-1] if done else None


def check_resume(directory: str | Path, fingerprint: dict) -> Path | None:
    """The checkpoint to resume from, or None; a checkpoint from another training config is refused."""
    ckpt = latest_checkpoint(directory)
    if ckpt is None:
        return None
    state = read_json(ckpt / "state.json")
    theirs = state.get("fingerprint") or {}
    if state.get("digest") != _digest(fingerprint):
        keys = sorted(k for k in set(theirs) | set(fingerprint) if theirs.get(k) != fingerprint.get(k))
        shown = "; ".join(f"lora.{k} = {fingerprint.get(k)!r} now, {theirs.get(k)!r} in the checkpoint" for k in keys)
        raise LoraError(f"resume checkpoint {ckpt} was made with a different training config ({shown}); nothing "
                        f"was overwritten; allowed: the config it was made with, or remove {Path(directory)} to "
                        "train from the first step")
    return ckpt


def _optimizer(params, spec: TrainSpec, cuda: bool):
    import torch

    if cuda:
        try:
            import bitsandbytes as bnb
        except ImportError as exc:
            raise LoraError(f"lora.device = {spec.device!r}: LoRA training on CUDA uses 8-bit AdamW, and the "
                            f"bitsandbytes package cannot be imported here ({exc}); allowed: install "
                            f"{BITSANDBYTES_PIN} (envs/pod.txt), or lora.device = 'cpu'") from None
        return bnb.optim.AdamW8bit(params, lr=spec.lr, weight_decay=spec.weight_decay), "bitsandbytes AdamW8bit"
    return torch.optim.AdamW(params, lr=spec.lr, weight_decay=spec.weight_decay), "torch AdamW (CPU: no 8-bit AdamW)"


def _load_frozen(spec: TrainSpec, path: Path):
    """The transformer at the frozen dtype and the VAE (fp32 on CPU, bf16 on CUDA): nothing else."""
    import torch

    frozen = _torch_dtype(spec.frozen_dtype)
    cuda = spec.device.startswith("cuda")
    common = {"local_files_only": True}
    if spec.backend == "qwen_image_edit_plus":
        from diffusers import AutoencoderKLQwenImage, QwenImageTransformer2DModel

        transformer = QwenImageTransformer2DModel.from_pretrained(str(path), subfolder="transformer", dtype=frozen, **common)
        vae = AutoencoderKLQwenImage.from_pretrained(str(path), subfolder="vae",
                                                     dtype=torch.bfloat16 if cuda else torch.float32, **common)
    else:
        from diffusers import AutoencoderKL

        _, OmniGen2Transformer2DModel = _import_omnigen2()
        transformer = OmniGen2Transformer2DModel.from_pretrained(str(path), subfolder="transformer", dtype=frozen, **common)
        vae = AutoencoderKL.from_pretrained(str(path), subfolder="vae",
                                            dtype=torch.bfloat16 if cuda else torch.float32, **common)
    return transformer, vae


def _load_text_encoder(spec: TrainSpec, path: Path):
    """`text_encoder: resident` only: the seeds' setup keeps the encoder on the card (it computes nothing here)."""
    from transformers import Qwen2_5_VLForConditionalGeneration

    sub = "text_encoder" if spec.backend == "qwen_image_edit_plus" else "mllm"
    return sub, Qwen2_5_VLForConditionalGeneration.from_pretrained(str(path / sub), dtype=_torch_dtype("bf16"),
                                                                   local_files_only=True)


def _encode_latents(spec: TrainSpec, vae, images: dict[str, object], device: str) -> dict:
    """Each distinct record image -> its VAE latents (the distribution's mode: no sampling noise)."""
    import torch

    out = {}
    with torch.no_grad():
        for key, image in images.items():
            px = _pixels(image).to(device=device, dtype=vae.dtype)
            if spec.backend == "qwen_image_edit_plus":
                z = vae.encode(px.unsqueeze(2)).latent_dist.mode()  # (1, C, 1, h, w)
                c = z.shape[1]
                mean = torch.tensor(vae.config.latents_mean).view(1, c, 1, 1, 1).to(z)
                std = torch.tensor(vae.config.latents_std).view(1, c, 1, 1, 1).to(z)
                z = (z - mean) / std
            else:
                z = vae.encode(px).latent_dist.mode()  # (1, C, h, w), as OmniGen2's encode_vae scales it
                if vae.config.shift_factor is not None:
                    z = z - vae.config.shift_factor
                if vae.config.scaling_factor is not None:
                    z = z * vae.config.scaling_factor
            out[key] = z.float()
    return out


def _pack(z):
    """(1, C, 1, h, w) -> (1, h/2 * w/2, 4C): the Qwen-Image pipeline's _pack_latents."""
    b, c, _, h, w = z.shape
    z = z.view(b, c, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5)
    return z.reshape(b, (h // 2) * (w // 2), c * 4)


@dataclass
class Batch:
    x0: object        # target latents
    source: object    # source latents
    embeds: object
    mask: object


def flow_loss(transformer, backend: str, batch: Batch, t, noise, compute_dtype, freqs_cis=None):
    """The backend's rectified-flow loss for one record at timestep t (see the module docstring)."""
    import torch
    import torch.nn.functional as F

    x0 = batch.x0
    if backend == "qwen_image_edit_plus":
        xt = (1.0 - t) * x0 + t * noise
        target = noise - x0
        _, _, _, h, w = x0.shape
        tgt, src = _pack(xt), _pack(batch.source)
        mask = None if bool(batch.mask.all()) else batch.mask
        pred = transformer(
            hidden_states=torch.cat([tgt, src], dim=1).to(compute_dtype),
            timestep=t.reshape(1).to(compute_dtype),
            guidance=None,
            encoder_hidden_states=batch.embeds.to(compute_dtype),
            encoder_hidden_states_mask=mask,
            img_shapes=[[(1, h // 2, w // 2), (1, batch.source.shape[3] // 2, batch.source.shape[4] // 2)]],
            return_dict=False,
        )[0][:, : tgt.shape[1]]
        return F.mse_loss(pred.float(), _pack(target).float())
    xt = t * x0 + (1.0 - t) * noise  # OmniGen2's ICPlan: t = 1 is the data
    target = x0 - noise
    pred = transformer([xt[0].to(compute_dtype)], t.reshape(1).to(compute_dtype), batch.embeds.to(compute_dtype),
                       freqs_cis, batch.mask, ref_image_hidden_states=[[batch.source[0].to(compute_dtype)]])
    pred = pred[0] if isinstance(pred, (list, tuple)) else pred
    return F.mse_loss(pred.float().reshape(target.shape), target.float())


def flow_losses(transformer, backend: str, batches: list[Batch], ts: list, noises: list, compute_dtype,
                freqs_cis=None):
    """The per-sample losses of a micro-batch, each as `flow_loss` computes it: OmniGen2's transformer takes the
    samples in one forward (each keeps its own latents, timestep, noise, reference and prompt, the prompts padded on
    the right); Qwen-Image's, one sample a forward."""
    import torch
    import torch.nn.functional as F

    if backend != "omnigen2" or len(batches) == 1:
        return [flow_loss(transformer, backend, b, t, n, compute_dtype, freqs_cis) for b, t, n in zip(batches, ts, noises)]
    xts, targets = [], []
    for b, t, n in zip(batches, ts, noises):
        xts.append((t * b.x0 + (1.0 - t) * n)[0].to(compute_dtype))  # OmniGen2's ICPlan: t = 1 is the data
        targets.append(b.x0 - n)
    embeds, mask = right_padded([(b.embeds, b.mask) for b in batches], dtype=compute_dtype)
    t = torch.cat([x.reshape(1) for x in ts]).to(compute_dtype)
    pred = transformer(xts, t, embeds, freqs_cis, mask,
                       ref_image_hidden_states=[[b.source[0].to(compute_dtype)] for b in batches])
    preds = list(pred) if isinstance(pred, (list, tuple)) else list(pred.unbind(0))
    return [F.mse_loss(p.float().reshape(tg.shape), tg.float()) for p, tg in zip(preds, targets)]


def _rng_state(cuda: bool, data_gen) -> dict:
    import numpy as np
    import torch

    return {"torch": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state_all() if cuda else None,
            "python": random.getstate(), "numpy": np.random.get_state(), "data": data_gen.get_state()}


def _set_rng_state(state: dict, cuda: bool, data_gen) -> None:
    import numpy as np
    import torch

    torch.set_rng_state(state["torch"])
    if cuda and state["cuda"] is not None:
        torch.cuda.set_rng_state_all(state["cuda"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    data_gen.set_state(state["data"])


def save_checkpoint(directory: str | Path, step: int, transformer, optimizer, rng: dict, losses: list[dict],
                    fingerprint: dict) -> Path:
    """step-NNNNNN/: adapter.safetensors, optimizer.pt, rng.pt, state.json (step, losses, fingerprint), written
    beside its place and renamed into it; older checkpoints are removed once it is in place."""
    import torch
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    root = Path(directory)
    final = root / f"{CHECKPOINT_PREFIX}{step:06d}"
    with atomic_dir(final) as tmp:
        save_file({k: v.detach().contiguous() for k, v in get_peft_model_state_dict(transformer).items()},
                  str(tmp / "adapter.safetensors"))
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save(rng, tmp / "rng.pt")
        write_json(tmp / "state.json", {"step": step, "losses": losses, "fingerprint": fingerprint,
                                        "digest": _digest(fingerprint)})
    for old in root.glob(CHECKPOINT_PREFIX + "*"):
        if old != final and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    return final


def census(path: str | Path) -> dict:
    """Read back from the saved file: its tensors, the LoRA ones, their parameters, and its metadata."""
    from safetensors import safe_open

    total, lora, params, meta = 0, 0, 0, None
    with safe_open(str(path), framework="pt") as fh:
        meta = json.loads((fh.metadata() or {}).get(LORA_METADATA_KEY, "null"))
        for key in fh.keys():
            total += 1
            if ".lora_A." in key or ".lora_B." in key:
                lora += 1
            shape = fh.get_slice(key).get_shape()
            n = 1
            for d in shape:
                n *= int(d)
            params += n
    return {"tensors": total, "lora_tensors": lora, "trainable_parameters": params, "metadata": meta}


def _plot(losses: list[dict], png: str, title: str, smoke: bool) -> None:
    from fourloops.figures import mark_smoke, pyplot, save_png

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    steps = [r["step"] for r in losses]
    ax.plot(steps, [r["loss"] for r in losses], lw=1.2, color="#1f77b4", label="loss (mean of the micro-steps)")
    for before, r in zip(losses, losses[1:]):
        if r["attempt"] != before["attempt"]:  # a resumed run continues the curve from here
            ax.axvline(r["step"] - 0.5, color="#7f7f7f", lw=0.8, ls="--", label="resumed")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("flow-matching MSE")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.93) if smoke else None)
    if smoke:
        mark_smoke(fig)
    save_png(fig, png)


def train(spec: TrainSpec, records_path: str, embeddings_path: str, out_path: str, loss_csv: str, loss_png: str,
          checkpoint_dir: str, micro_batch: int | None = None) -> dict:
    """Train the LoRA and write it (atomically, at the end), its loss table and curve; resume from the last
    checkpoint in `checkpoint_dir` when there is one. Each optimizer step takes `spec.accumulation` samples,
    `micro_batch` a forward (the job's resolved batch; None: spec.micro_batch, which must then be a number); the
    samples are drawn in the same order whatever the micro-batch. Returns the provenance fields."""
    import numpy as np
    import pandas as pd
    import torch
    from peft import LoraConfig, get_peft_model_state_dict, set_peft_model_state_dict
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from fourloops.hub import resolve_model

    spec.check()
    cuda = spec.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise LoraError(f"lora.device = {spec.device!r}: torch sees no CUDA device here; allowed: cpu")
    path, source = resolve_model(spec.model, spec.revision)
    multiple = check_resolution(spec.backend, path, spec.resolution)
    records = read_records(records_path)
    with safe_open(embeddings_path, framework="pt") as fh:
        emb_meta = json.loads((fh.metadata() or {}).get(EMBEDDINGS_META_KEY, "{}"))
        keys = set(fh.keys())
    if emb_meta.get("backend") != spec.backend:
        raise LoraError(f"{embeddings_path}: embeddings of backend {emb_meta.get('backend')!r}, the training is "
                        f"for {spec.backend!r}; allowed: embeddings from the same generator")
    missing = [r["id"] for r in records if f"{r['id']}.embeds" not in keys]
    if missing:
        raise LoraError(f"{embeddings_path}: no embeddings for records {missing[:5]}; allowed: the embeddings "
                        f"made from {records_path}")
    micro = int(micro_batch if micro_batch is not None else spec.micro_batch)
    if micro < 1:
        raise LoraError(f"lora.micro_batch resolved to {micro}; allowed: a whole number >= 1")
    micro = min(micro, spec.accumulation)
    # a step's sums run in the micro-batch's order: a resume continues only a training of the same micro-batch
    fingerprint = spec.fingerprint(sha256_file(records_path), sha256_file(embeddings_path)) | {"micro_batch": micro}
    resume = check_resume(checkpoint_dir, fingerprint)

    # seeds first: the LoRA's initial weights come from them
    torch.manual_seed(spec.seed)
    random.seed(spec.seed)
    np.random.seed(spec.seed % 2**32)
    data_gen = torch.Generator().manual_seed(spec.seed)

    t_load = time.perf_counter()
    transformer, vae = _load_frozen(spec, path)
    loaded = {"transformer": int(sum(p.numel() for p in transformer.parameters())),
              "vae": int(sum(p.numel() for p in vae.parameters()))}
    wrapped = check_targets(transformer, list(spec.target_modules), spec.backend)
    embeddings = load_file(embeddings_path)
    images = {}
    for rec in records:
        for key in ("source", "target"):
            if rec[key] not in images:
                images[rec[key]] = load_image(rec[key], spec.resolution)
    vae.to(spec.device)
    latents = _encode_latents(spec, vae, images, spec.device)
    del vae
    resident = None
    if spec.text_encoder == "resident":
        sub, resident = _load_text_encoder(spec, path)
        resident.to(spec.device)
        loaded[sub] = int(sum(p.numel() for p in resident.parameters()))

    transformer.requires_grad_(False)
    transformer.add_adapter(LoraConfig(r=spec.rank, lora_alpha=spec.alpha, lora_dropout=spec.dropout,
                                       target_modules=list(spec.target_modules), init_lora_weights=True))
    trainable = [p for p in transformer.parameters() if p.requires_grad]
    for p in trainable:  # the LoRA trains in fp32 whatever the frozen dtype
        p.data = p.data.float()
    transformer.to(spec.device)
    transformer.train()
    if cuda:
        transformer.enable_gradient_checkpointing()
    optimizer, optimizer_name = _optimizer(trainable, spec, cuda)
    load_seconds = time.perf_counter() - t_load

    losses: list[dict] = []
    start, attempt = 0, 0
    if resume is not None:
        set_peft_model_state_dict(transformer, load_file(str(resume / "adapter.safetensors")))
        for p in trainable:
            p.data = p.data.float()
        optimizer.load_state_dict(torch.load(resume / "optimizer.pt", weights_only=False))
        _set_rng_state(torch.load(resume / "rng.pt", weights_only=False), cuda, data_gen)
        state = read_json(resume / "state.json")
        start, losses = int(state["step"]), list(state["losses"])
        attempt = max((r["attempt"] for r in losses), default=0) + 1

    compute = _torch_dtype(spec.frozen_dtype)
    autocast = cuda and spec.frozen_dtype == "fp32"
    freqs_cis = None
    if spec.backend == "omnigen2":
        from omnigen2.models.transformers.repo import OmniGen2RotaryPosEmbed

        freqs_cis = OmniGen2RotaryPosEmbed.get_freqs_cis(transformer.config.axes_dim_rope,
                                                         transformer.config.axes_lens, theta=10000)

    def batch_of(rec) -> Batch:
        mask = embeddings[f"{rec['id']}.mask"].unsqueeze(0).to(spec.device)
        return Batch(latents[rec["target"]], latents[rec["source"]],
                     embeddings[f"{rec['id']}.embeds"].unsqueeze(0).to(spec.device), mask)

    t_train = time.perf_counter()
    for step in range(start, spec.steps):
        t0 = time.perf_counter()
        total = 0.0
        for first in range(0, spec.accumulation, micro):
            batches, ts, noises = [], [], []
            for _ in range(min(micro, spec.accumulation - first)):  # each sample's draws in the order of 1 x N
                rec = records[int(torch.randint(len(records), (1,), generator=data_gen))]
                batch = batch_of(rec)
                batches.append(batch)
                ts.append(torch.rand((1,), generator=data_gen).to(spec.device))
                noises.append(torch.randn(batch.x0.shape, generator=data_gen).to(spec.device))
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                losses_mb = flow_losses(transformer, spec.backend, batches, ts, noises, compute, freqs_cis)
            (torch.stack(losses_mb).sum() / spec.accumulation).backward()
            total += sum(float(x.detach()) for x in losses_mb)
        torch.nn.utils.clip_grad_norm_(trainable, spec.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append({"step": step + 1, "loss": total / spec.accumulation, "lr": spec.lr,
                       "seconds": round(time.perf_counter() - t0, 4), "attempt": attempt})
        if (step + 1) % spec.checkpoint_every == 0 and step + 1 < spec.steps:
            save_checkpoint(checkpoint_dir, step + 1, transformer, optimizer, _rng_state(cuda, data_gen), losses,
                            fingerprint)
    train_seconds = time.perf_counter() - t_train

    state_dict = {k: v.detach().to("cpu").contiguous() for k, v in get_peft_model_state_dict(transformer).items()}
    with atomic_path(loss_csv) as tmp:
        pd.DataFrame(losses, columns=["step", "loss", "lr", "seconds", "attempt"]).to_csv(
            tmp, index=False, float_format="%.8g")
    _plot(losses, loss_png, f"{spec.backend} LoRA r{spec.rank} at {spec.resolution} px, {spec.frozen_dtype} frozen",
          smoke=spec.model_set == "smoke")
    with atomic_path(out_path) as tmp:
        save_file(state_dict, str(tmp), metadata={LORA_METADATA_KEY: json.dumps(spec.metadata(), sort_keys=True)})
    shutil.rmtree(checkpoint_dir, ignore_errors=True)  # the final LoRA supersedes them
    with contextlib.suppress(OSError):  # results/lora/checkpoints/, when no other LoRA's are there
        Path(checkpoint_dir).parent.rmdir()

    counted = census(out_path)
    return {
        "components_loaded": sorted(loaded),
        "parameters_by_component": loaded,
        "text_encoder_loaded": resident is not None,
        "model_path": str(path), "model_source": source.get("source"),
        "census": {k: counted[k] for k in ("tensors", "lora_tensors", "trainable_parameters")}
                  | {"lora_layers": wrapped, "live_trainable_parameters": int(sum(p.numel() for p in trainable))},
        "lora_metadata": counted["metadata"],
        "optimizer": optimizer_name,
        "gradient_checkpointing": bool(cuda),
        "autocast": "bf16" if autocast else None,
        "resolution_multiple": multiple,
        "resumed_from_step": start if resume is not None else None,
        "steps": spec.steps, "micro_batch": micro, "forwards_per_step": -(-spec.accumulation // micro),
        "loss_first": losses[0]["loss"], "loss_last": losses[-1]["loss"],
        "load_seconds": round(load_seconds, 3), "train_seconds": round(train_seconds, 3),
        "precision": spec.frozen_dtype,
    }
