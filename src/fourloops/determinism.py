"""Same inputs, same code, same machine kind: same bytes, on the GPU as on the CPU.

Every stage whose jobs compute with torch calls `apply(seed)` first, in its job's own process, before CUDA starts:
  * the global generators (Python's, NumPy's, torch's on every device) seeded by the job's seed, so that a draw a
    third-party library makes without a generator of its own is the same every run (the draws this workflow makes
    itself take generators of their own: `generator(seed, ...)`);
  * `torch.use_deterministic_algorithms(True)`, strict: an operation with no deterministic kernel stops the job with
    torch's error naming it, instead of warning (in warn-only mode torch also keeps its non-deterministic
    memory-efficient attention backward);
  * `CUBLAS_WORKSPACE_CONFIG`, which cuBLAS reads when CUDA starts (refused once CUDA has started without it);
  * cuDNN's benchmark off and its deterministic mode on; fp32 matrix products and convolutions at full IEEE
    precision (no TF32), whatever the card's default;
  * torch's fill of uninitialized memory off (`torch.utils.deterministic.fill_uninitialized_memory`): under the
    strict check torch writes NaN into every tensor it allocates uninitialized, a kernel launch each, which keeps
    the bits only of a program that reads memory it never wrote. torch's documentation says to turn it off where
    the program reads none; the GPU pair (bench/gpu_run.sh repro) is the check that ours reads none;
  * Triton kernels that pick their launch configuration by timing (`pin_autotuned`) given one configuration chosen
    from the problem's shape, so two processes launch the same kernel.

Where torch's strict check costs more than the bits need, a job's models take the cheaper kernels that still give the
same bits, each named in the record with why: `attention_kernels` (OmniGen2's attention) and `exempt_calls`.

`state()` reads the settings back from the live process (never from this module's intentions) for the job's
provenance record, with the GPU, driver, CUDA, cuDNN and torch versions they hold for.

`FOURLOOPS_DETERMINISM=off` (read where the job runs) leaves the kernel settings at torch's defaults, so a bench can
measure what they cost; the seeds still apply, the record says `mode: off`, and the publication gate refuses what
such a job made.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import sys

SWITCH = "FOURLOOPS_DETERMINISM"
MODES = ("on", "off")
CUBLAS_VAR = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_VALUE = ":4096:8"  # cuBLAS's documented setting for reproducible results (8 workspaces of 4 MiB)
NO_SEED = 0  # the global generators' seed in a job that draws nothing on purpose (no `seed` param)

_applied: dict | None = None  # what apply() set in this process: mode and seed
_pinned: list[str] = []  # the autotuned kernels given one configuration in this process
_exempt: list[str] = []  # the calls run with torch's determinism check off, and why their bits are fixed anyway


class DeterminismError(RuntimeError):
    pass


def mode(environ=os.environ) -> str:
    value = environ.get(SWITCH, "on") or "on"
    if value not in MODES:
        raise DeterminismError(f"{SWITCH}={value!r}: not a mode; allowed: one of {list(MODES)} (unset: on)")
    return value


def derived_seed(seed: int, *labels: object) -> int:
    """A seed of its own for each labelled draw of a job (a reference image's encode, say): 63 bits of the sha256
    of the job's seed and the labels, the same on every machine and in every process."""
    digest = hashlib.sha256(repr((int(seed),) + tuple(str(x) for x in labels)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def generator(seed: int, *labels: object):
    """A CPU torch generator seeded by `derived_seed(seed, *labels)` (or `seed` itself without labels): a CPU
    generator draws the same numbers whatever device the tensor then moves to."""
    import torch

    return torch.Generator(device="cpu").manual_seed(derived_seed(seed, *labels) if labels else int(seed))


def before_cuda(environ=os.environ) -> None:
    """Set CUBLAS_WORKSPACE_CONFIG (unless the mode is off) in a job's process before anything starts CUDA: the job's
    glue (fourloops.jobs) does, as its first step, since it reads the card before the stage function runs."""
    if mode(environ) == "on":
        environ[CUBLAS_VAR] = CUBLAS_VALUE


def apply(seed: int | None) -> dict:
    """Seed the global generators with `seed` (NO_SEED when None) and, unless the mode is off, fix every kernel
    setting above. Call it first in a job's stage function: CUBLAS_WORKSPACE_CONFIG must be set before CUDA starts."""
    global _applied
    chosen = mode()
    value = NO_SEED if seed is None else int(seed)
    random.seed(value)
    try:
        import numpy as np

        np.random.seed(value % 2**32)
    except ImportError:
        pass
    import torch

    if chosen == "on":
        if os.environ.get(CUBLAS_VAR) != CUBLAS_VALUE:
            if torch.cuda.is_initialized():
                raise DeterminismError(
                    f"CUDA started in this process before {CUBLAS_VAR} was set ({os.environ.get(CUBLAS_VAR)!r}); "
                    f"cuBLAS reads it once, when CUDA starts: call fourloops.determinism.apply() first in the stage "
                    f"function, before any model loads")
            os.environ[CUBLAS_VAR] = CUBLAS_VALUE
        torch.use_deterministic_algorithms(True, warn_only=False)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        if hasattr(torch.utils, "deterministic"):
            torch.utils.deterministic.fill_uninitialized_memory = False
        _full_fp32(torch)
    torch.manual_seed(value)  # every device's default generator
    _applied = {"mode": chosen, "seed": value}
    return state()


def _full_fp32(torch) -> None:
    """fp32 products and convolutions at IEEE precision (no TF32): through the fp32_precision settings where torch
    has them (mixing them with the older allow_tf32 flags is refused by torch), else through those flags."""
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        torch.backends.cudnn.fp32_precision = "ieee"
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def pin_autotuned(module, choose, label: str) -> list[str]:
    """Give every Triton autotuner in `module` one configuration, `choose(configs, named_args)`, instead of the
    fastest by timing: the timing differs between processes, and with it the launch configuration and the order
    of a kernel's reductions. Only when the mode is on (off keeps the library's own autotuning, as a bench's
    baseline). Returns the names pinned ("label.kernel")."""
    if mode() != "on":
        return []
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # no Triton: nothing autotunes
        return []

    def prune(configs, named_args, **kwargs):
        return [choose(configs, {**named_args, **kwargs})]

    names = []
    for name in sorted(vars(module)):
        obj = getattr(module, name)
        if isinstance(obj, Autotuner):
            obj.early_config_prune = prune
            names.append(f"{label}.{name}")
    for n in names:
        if n not in _pinned:
            _pinned.append(n)
    return names


@contextlib.contextmanager
def checks_off(torch):
    """torch's determinism check off for the body, back as it was after (strict or warn-only)."""
    strict = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(strict, warn_only=warn_only)


def exempt_calls(owner, method: str, label: str, why: str) -> None:
    """Run `owner.method` with torch's determinism check off: for a call torch flags as having no deterministic
    kernel whose result is exact whatever the order of its sums (`why` says how, and the record names it). Only
    when the mode is on; the check is back on when the call returns."""
    if mode() != "on" or getattr(getattr(owner, method), "_fourloops_exempt", False):
        return
    import functools

    import torch

    original = getattr(owner, method)

    @functools.wraps(original)
    def call(*args, **kwargs):
        with checks_off(torch):
            return original(*args, **kwargs)

    call._fourloops_exempt = True
    setattr(owner, method, call)
    _name_exempt(f"{label}: {why}")


def _name_exempt(entry: str) -> None:
    """Name a call run with torch's check off, and why, for the job's record (once)."""
    if entry not in _exempt:
        _exempt.append(entry)


ATTENTION_WHY = {
    "no gradient": "a call with no gradient to take runs with torch's check off, so that it keeps the fused forward "
                   "kernels (cuDNN's, flash): a forward adds in a fixed order; the atomic adds torch guards against are "
                   "in the backward, which such a call never runs",
    "mask of every key": "a call that takes a gradient through a boolean mask admitting every key drops the mask (the "
                         "same attention), so that torch may pick flash attention, whose backward has a deterministic "
                         "mode under strict settings, instead of the memory-efficient kernels' slower one",
    "padded keys": "a call that takes a gradient through a boolean mask admitting a prefix of each sample's keys (a "
                   "micro-batch of padded prompts) runs as one unmasked call a sample over its admitted keys (the "
                   "same attention), so that each takes flash attention's deterministic backward instead of the "
                   "memory-efficient kernels' slower one",
}


def attention_kernels(label: str) -> list[str]:
    """Route torch.nn.functional.scaled_dot_product_attention, which OmniGen2's processors, diffusers and
    transformers look up at call time, through the cheaper kernel choices in ATTENTION_WHY, and record them
    under `exempt_calls` ("label: why"). Without them, strict settings rule cuDNN's fused attention out of every
    call and leave a masked call the memory-efficient kernels. Only when the mode is on (off keeps torch's own
    choice, as a bench's baseline); a second call changes nothing. Returns the entries recorded."""
    if mode() != "on":
        return []
    import functools

    import torch
    import torch.nn.functional as F

    entries = [f"{label} scaled_dot_product_attention, {case}: {why}" for case, why in ATTENTION_WHY.items()]
    for entry in entries:
        _name_exempt(entry)
    original = F.scaled_dot_product_attention
    if getattr(original, "_fourloops_attention", False):
        return entries

    @functools.wraps(original)
    def sdpa(*args, **kwargs):
        if not takes_gradient(torch, args, kwargs):
            with checks_off(torch):
                return original(*args, **kwargs)
        # the padded-prefix test first: a padded micro-batch's mask is then read back from the card once
        split = prefix_split(torch, original, args, kwargs)
        if split is not None:
            return split
        args, kwargs = without_full_mask(torch, args, kwargs)
        return original(*args, **kwargs)

    sdpa._fourloops_attention = True
    F.scaled_dot_product_attention = sdpa
    return entries


def takes_gradient(torch, args: tuple, kwargs: dict) -> bool:
    """Whether a scaled_dot_product_attention call (its arguments) builds a graph: autograd on and a query, key or
    value that requires a gradient."""
    qkv = [*args[:3], *(kwargs[k] for k in ("query", "key", "value") if k in kwargs)]
    return torch.is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in qkv)


def without_full_mask(torch, args: tuple, kwargs: dict):
    """A scaled_dot_product_attention call's (args, kwargs) with a boolean mask that admits every key dropped (the
    same attention), given as `attn_mask=` or fourth positionally; any other mask kept."""
    if "attn_mask" in kwargs:
        if _admits_every_key(torch, kwargs["attn_mask"]):
            kwargs = {**kwargs, "attn_mask": None}
    elif len(args) > 3 and _admits_every_key(torch, args[3]):
        args = (*args[:3], None, *args[4:])
    return args, kwargs


def prefix_split(torch, sdpa, args: tuple, kwargs: dict):
    """`sdpa(q, k, v, attn_mask=m, ...)` for a boolean key mask m of shape (B, 1, 1, K) whose row b admits the first
    n_b keys alone, and not all of them in every row, as B unmasked calls, sample b over its first n_b keys: the same
    attention (a query attends to the keys the mask admits; a masked key adds nothing). None where the mask is of
    another form, or admits every key, or where q, k and v are not given positionally."""
    if len(args) < 3:
        return None
    q, k, v = args[:3]
    mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
    if mask is None or mask.dtype != torch.bool or mask.dim() != 4 or mask.shape[1:3] != (1, 1) \
            or mask.shape[0] != q.shape[0] or k.shape[0] != q.shape[0]:
        return None
    keys = mask.reshape(mask.shape[0], -1)
    n = keys.sum(dim=1)
    prefix = (keys == (torch.arange(keys.shape[1], device=keys.device)[None, :] < n[:, None])).all()
    *counts, is_prefix = torch.cat([n, prefix.to(n.dtype)[None]]).tolist()  # one wait for the card, not three
    if not is_prefix or min(counts) == 0 or min(counts) == keys.shape[1]:
        return None
    rest = {key: val for key, val in kwargs.items() if key != "attn_mask"}
    tail = args[4:]
    return torch.cat([sdpa(q[b:b + 1], k[b:b + 1, :, :m], v[b:b + 1, :, :m], None, *tail, **rest)
                      for b, m in enumerate(counts)])


def _admits_every_key(torch, mask) -> bool:
    return mask is not None and mask.dtype == torch.bool and bool(mask.all())


def _cuda_versions(torch) -> dict:
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": None, "gpu": None, "capability": None}
    try:
        out["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001 - a build without cuDNN
        pass
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        index = torch.cuda.current_device()
        out["gpu"] = torch.cuda.get_device_name(index)
        out["capability"] = ".".join(str(x) for x in torch.cuda.get_device_capability(index))
    return out


def _fp32(torch) -> dict:
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        return {"matmul_fp32_precision": torch.backends.cuda.matmul.fp32_precision,
                "cudnn_fp32_precision": torch.backends.cudnn.fp32_precision}
    return {"matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32)}


def state() -> dict:
    """The determinism settings as this process holds them now, read from torch and the environment: what a job's
    provenance records. `applied`: whether the job's stage called apply(); the driver's version is the record's
    `gpu.driver` (NVML)."""
    torch = sys.modules.get("torch")
    out: dict = {"applied": _applied is not None, "mode": (_applied or {}).get("mode"),
                 "seed": (_applied or {}).get("seed"), CUBLAS_VAR: os.environ.get(CUBLAS_VAR),
                 "pinned_autotuners": list(_pinned), "exempt_calls": list(_exempt)}
    if torch is None:
        return out | {"torch_loaded": False}
    out |= {
        "torch_loaded": True,
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "deterministic_warn_only": bool(torch.is_deterministic_algorithms_warn_only_enabled()),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "fill_uninitialized_memory": (bool(torch.utils.deterministic.fill_uninitialized_memory)
                                      if hasattr(torch.utils, "deterministic") else None),
        **_fp32(torch),
        "versions": _cuda_versions(torch),
    }
    return out


def reproducible(record_state: dict | None) -> tuple[bool, str]:
    """Whether a job's recorded state (`state()`) makes its bytes reproducible, and why not."""
    if not record_state or not record_state.get("applied"):
        return False, "its stage did not apply fourloops.determinism"
    if record_state.get("mode") != "on":
        return False, f"{SWITCH}={record_state.get('mode')} where it ran"
    if record_state.get("torch_loaded") and not (record_state.get("deterministic_algorithms")
                                                 and not record_state.get("deterministic_warn_only")):
        return False, "torch's deterministic algorithms were not on (strict) when it ended"
    return True, ""
