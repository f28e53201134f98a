"""Tiny, randomly initialised instruction-editing pipelines for the smoke model set.

`build_smoke_generator` builds every component of a diffusers-native backend from a config (no
download: the tokenizer and the processor are built in memory), seeds each one with
`torch.manual_seed`, and writes the whole pipeline with `save_pretrained`. The result is loaded by
`fourloops.generate.load_backend` through exactly the same `from_pretrained` code path as real
weights. The images it makes are noise; the point is to exercise the plumbing in about a second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fourloops import io

from fourloops.backends import SMOKE_BACKENDS

# Token ids of the special tokens of the in-memory tokenizer: they follow the 256 byte tokens.
_SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

# Sizes of the tiny QwenImageEditPlus pipeline (about 90k parameters in all).
TINY_QWEN = {
    "text_hidden": 16,  # Qwen2.5-VL language model width (also the transformer's joint_attention_dim)
    "text_layers": 1,
    "vision_hidden": 16,
    "vision_depth": 1,
    "vision_max_pixels": 56 * 56,  # processor cap: each reference becomes 2x2 merged vision tokens
    "vae_base_dim": 2,
    "vae_num_res_blocks": 0,  # the encoder runs at 1024x1024 per reference: keep its full-res work minimal
    "vae_z_dim": 4,
    "vae_dim_mult": [1, 1, 1, 1, 1],  # four spatial downsamplings: vae_scale_factor 16
    "transformer_layers": 1,
    "transformer_heads": 2,
    "transformer_head_dim": 16,
    "axes_dims_rope": [4, 6, 6],
}


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2 byte-level mapping of the 256 byte values to printable unicode characters."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars)))


def _tiny_qwen_tokenizer():
    from transformers import Qwen2Tokenizer

    byte_chars = sorted(_bytes_to_unicode().values(), key=lambda c: ord(c))
    vocab = {ch: i for i, ch in enumerate(byte_chars)}
    for tok in _SPECIAL_TOKENS:
        vocab[tok] = len(vocab)
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=[], additional_special_tokens=list(_SPECIAL_TOKENS[1:]))
    tokenizer.model_max_length = 4096
    return tokenizer, vocab


def _build_qwen_image_edit_plus(seed: int):
    import torch
    from diffusers import (
        AutoencoderKLQwenImage,
        FlowMatchEulerDiscreteScheduler,
        QwenImageEditPlusPipeline,
        QwenImageTransformer2DModel,
    )
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    t = TINY_QWEN
    tokenizer, vocab = _tiny_qwen_tokenizer()
    image_processor = Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=t["vision_max_pixels"])
    video_processor = Qwen2VLVideoProcessor()
    processor = Qwen2VLProcessor(image_processor=image_processor, tokenizer=tokenizer, video_processor=video_processor)

    torch.manual_seed(seed)
    text_config = Qwen2_5_VLConfig(
        text_config={
            "hidden_size": t["text_hidden"],
            "intermediate_size": t["text_hidden"],
            "num_hidden_layers": t["text_layers"],
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "vocab_size": len(vocab),
            "max_position_embeddings": 4096,
            "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"},
            "rope_theta": 1000000.0,
            "bos_token_id": vocab["<|endoftext|>"],
            "eos_token_id": vocab["<|im_end|>"],
            "pad_token_id": vocab["<|endoftext|>"],
        },
        vision_config={
            "depth": t["vision_depth"],
            "hidden_size": t["vision_hidden"],
            "intermediate_size": t["vision_hidden"],
            "num_heads": 2,
            "out_hidden_size": t["text_hidden"],
            "fullatt_block_indexes": [0],
        },
        hidden_size=t["text_hidden"],
        vocab_size=len(vocab),
        image_token_id=vocab["<|image_pad|>"],
        video_token_id=vocab["<|video_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"],
        vision_end_token_id=vocab["<|vision_end|>"],
        bos_token_id=vocab["<|endoftext|>"],
        eos_token_id=vocab["<|im_end|>"],
        pad_token_id=vocab["<|endoftext|>"],
    )
    text_encoder = Qwen2_5_VLForConditionalGeneration(text_config).eval()

    torch.manual_seed(seed)
    z_dim = t["vae_z_dim"]
    vae = AutoencoderKLQwenImage(
        base_dim=t["vae_base_dim"],
        z_dim=z_dim,
        dim_mult=t["vae_dim_mult"],
        num_res_blocks=t["vae_num_res_blocks"],
        temperal_downsample=[False] * (len(t["vae_dim_mult"]) - 1),
        latents_mean=[0.0] * z_dim,
        latents_std=[1.0] * z_dim,
    ).eval()

    torch.manual_seed(seed)
    transformer = QwenImageTransformer2DModel(
        patch_size=2,
        in_channels=z_dim * 4,
        out_channels=z_dim,
        num_layers=t["transformer_layers"],
        attention_head_dim=t["transformer_head_dim"],
        num_attention_heads=t["transformer_heads"],
        joint_attention_dim=t["text_hidden"],
        guidance_embeds=False,
        axes_dims_rope=tuple(t["axes_dims_rope"]),
    ).eval()

    scheduler = FlowMatchEulerDiscreteScheduler(
        base_image_seq_len=256,
        base_shift=0.5,
        max_image_seq_len=8192,
        max_shift=0.9,
        shift=1.0,
        shift_terminal=0.02,
        use_dynamic_shifting=True,
        time_shift_type="exponential",
    )
    return QwenImageEditPlusPipeline(
        scheduler=scheduler,
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        processor=processor,
        transformer=transformer,
    )


_BUILDERS = {"qwen_image_edit_plus": _build_qwen_image_edit_plus}


def build_smoke_generator(backend: str, out_dir: str, seed: int) -> dict[str, Any]:
    """Build the tiny pipeline of `backend` with fixed seeds and save it to `out_dir`.

    The directory is written beside its final place and renamed into it, so a killed build never
    leaves a complete-looking model directory. Returns the dict written to `out_dir/smoke.json`.
    """
    if backend == "omnigen2":
        raise ValueError(
            "no smoke model for backend 'omnigen2': a tiny OmniGen2 needs its own package "
            "(github VectorSpaceLab/OmniGen2), which the smoke set does not depend on; "
            f"smoke backends are {SMOKE_BACKENDS}"
        )
    if backend not in _BUILDERS:
        raise ValueError(f"unknown smoke backend {backend!r}; allowed: {SMOKE_BACKENDS}")

    import torch

    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    with torch.random.fork_rng(devices=[]):
        pipe = _BUILDERS[backend](int(seed))
    meta = {"model_set": "smoke", "backend": backend, "seed": int(seed), "built_by": "fourloops.smoke_generators"}
    with io.atomic_dir(out) as tmp:
        pipe.save_pretrained(tmp, safe_serialization=True)
        io.write_json(tmp / "smoke.json", meta)
    return meta
