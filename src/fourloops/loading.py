"""Loading a generator backend's weights: the one `from_pretrained` of a whole pipeline (`_from_pretrained`, counted
in `LOADS`), NF4 per backend, and the OmniGen2 package, which the LoRA stages import from here too.

torch, diffusers and OmniGen2 are imported lazily, so importing this module is cheap."""

from __future__ import annotations

from pathlib import Path

from fourloops.hub import GeneratorUnavailable

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

# Process-level count of model loads (calls of `_from_pretrained`); a job must add exactly one.
LOADS = 0


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
    _pin_omnigen2_kernels()
    return OmniGen2Pipeline, OmniGen2Transformer2DModel


def right_padded(pairs: list, pad_to: int | None = None, dtype=None):
    """Prompt encodings of different lengths, (1, L_i, D) with masks (1, L_i), as one batch padded on the right with
    zeros to `pad_to` tokens or the longest, at `dtype` (default: theirs); OmniGen2's transformer reads each prompt's
    first mask.sum() tokens. The generator's batched views and the LoRA's micro-batches pad alike."""
    import torch

    first, first_mask = pairs[0]
    longest = max([int(e.shape[1]) for e, _ in pairs] + [int(pad_to or 0)])
    out = torch.zeros((len(pairs), longest, first.shape[2]), dtype=dtype or first.dtype, device=first.device)
    mask = torch.zeros((len(pairs), longest), dtype=first_mask.dtype, device=first_mask.device)
    for i, (e, m) in enumerate(pairs):
        out[i, : e.shape[1]] = e[0].to(out.dtype)
        mask[i, : m.shape[1]] = m[0]
    return out, mask


def _layer_norm_warps(configs, args: dict):
    """The launch configuration of OmniGen2's fused RMSNorm kernels, from the row length alone: warps as the
    kernel's row block (the next power of two of N) needs them, 256 columns a warp, between 1 and 8. OmniGen2
    autotunes its warp count by timing, which differs between processes, and the warp count sets the order of
    the row's reduction: two processes then wrote different bits for the same input."""
    n = int(args.get("N") or 1)
    block = 1 << max(0, n - 1).bit_length()
    want = min(max(block // 256, 1), 8)
    return min(configs, key=lambda c: (abs(c.num_warps - want), c.num_warps))


def _pin_omnigen2_kernels() -> None:
    """OmniGen2's Triton RMSNorm (forward and backward), launched with `_layer_norm_warps` instead of the fastest
    configuration by timing (fourloops.determinism.pin_autotuned; a no-op without Triton or without the module), and
    its attention on the cheaper kernels that keep the bits (fourloops.determinism.attention_kernels)."""
    import sys

    from fourloops import determinism

    determinism.attention_kernels("omnigen2")
    # imported by OmniGen2's transformer module where Triton is there; without it OmniGen2 falls back to torch's
    # RMSNorm, which does not autotune
    module = sys.modules.get("omnigen2.ops.triton.layer_norm")
    if module is not None:
        determinism.pin_autotuned(module, _layer_norm_warps, "omnigen2.ops.triton.layer_norm")


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
