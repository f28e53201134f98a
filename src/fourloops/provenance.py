"""Provenance records: what produced an artifact, with what, where, and at what cost.

No secret ever lands here: the environment is never copied, and every string written passes
through `redact`, which replaces the values of known secret variables.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import resource
import socket
import subprocess
import sys
from pathlib import Path

from fourloops.io import sha256_file

SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "RUNPOD_API_KEY")
KEY_PACKAGES = (
    "fourloops", "snakemake", "torch", "torchvision", "diffusers", "transformers", "huggingface_hub",
    "rfdetr", "anny", "pyrender", "numpy", "scipy", "pillow", "bitsandbytes", "peft", "omnigen2",
)


def redact(text: str) -> str:
    for name in SECRET_ENV:
        value = os.environ.get(name)
        if value and len(value) >= 4:
            text = text.replace(value, f"<{name}>")
    return text


def redact_obj(obj):
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact(str(k)): redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    return obj


def code_version(repo: str | Path | None) -> dict:
    """Git commit and dirty flag of the workflow's repository (None outside git)."""
    if not repo:
        return {"commit": None, "dirty": None}
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=30
        ).stdout.strip()
    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (subprocess.CalledProcessError, FileNotFoundError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}


def package_versions() -> dict:
    out = {}
    for name in KEY_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def gpu_info() -> dict | None:
    """GPU names, driver and memory in use by every process, from NVML; None without an NVIDIA driver."""
    from fourloops.guard import read_nvml_with_driver

    found = read_nvml_with_driver()
    if found is None:
        return None
    cards, driver = found
    return {
        "driver": driver,
        "gpus": [
            {"index": c.index, "name": c.name, "memory_total_gib": c.total_gib, "memory_used_gib": c.used_gib}
            for c in cards
        ],
    }


def peak_rss_mib() -> float:
    """Peak resident memory of this process and its waited-for children (Linux reports KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024.0


def peak_vram_gib() -> float | None:
    """Peak memory torch allocated on CUDA in this process, if torch ever used CUDA here."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return max(torch.cuda.max_memory_allocated(i) for i in range(torch.cuda.device_count())) / 2**30


def peak_reserved_gib() -> float | None:
    """Peak of torch's reserved pool on CUDA in this process (allocated plus the caching allocator's slack)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return max(torch.cuda.max_memory_reserved(i) for i in range(torch.cuda.device_count())) / 2**30


ALLOC_ENV = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def cuda_allocator() -> dict | None:
    """torch's CUDA caching allocator as this process ran it: the allocator variables of the environment (torch's
    own settings, read where the job runs, never a param) and whether its segments were expandable, from torch's
    memory snapshot (None when torch cannot say). The pool's slack over what torch allocated, part of what the
    driver sees of a process, depends on it."""
    conf = {name: os.environ[name] for name in ALLOC_ENV if os.environ.get(name)}
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {"env": conf, "expandable_segments": None} if conf else None
    expandable = None
    try:
        snap = torch.cuda.memory._snapshot()
        settings = snap.get("allocator_settings") or {}
        if "expandable_segments" in settings:
            expandable = bool(settings["expandable_segments"])
        elif snap.get("segments"):
            expandable = any(bool(seg.get("is_expandable")) for seg in snap["segments"])
    except Exception:  # noqa: BLE001 - a torch without the snapshot's fields: the environment alone says
        expandable = None
    return {"env": conf, "expandable_segments": expandable}


KERNEL_CACHES = {  # name: (the variable that moves it, where it is by default)
    "cuda_jit": ("CUDA_CACHE_PATH", "~/.nv/ComputeCache"),
    "triton": ("TRITON_CACHE_DIR", "~/.triton/cache"),
}


def kernel_caches_kib(environ=os.environ) -> dict:
    """KiB on disk of each kernel cache a process's first run on a machine can fill (CUDA's JIT cache, Triton's),
    0 for one that does not exist. A probe whose caches grew compiled kernels a later process finds made, so its
    first item held a one-off cost that no later job pays (on an H200, the LoRA probe's first step took 19.3 s
    in a machine's first process, 5.6 s in the next)."""
    out = {}
    for name, (var, default) in KERNEL_CACHES.items():
        root = Path(os.path.expanduser(environ.get(var) or default))
        total = 0
        for dirpath, _, files in os.walk(root):
            for f in files:
                try:
                    total += os.lstat(os.path.join(dirpath, f)).st_size
                except OSError:
                    pass
        out[name] = round(total / 1024, 1)
    return out


def file_entries(paths) -> list[dict]:
    out = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            for f in sorted(x for x in p.rglob("*") if x.is_file()):
                out.append({"path": str(f), "sha256": sha256_file(f), "bytes": f.stat().st_size})
        elif p.exists():
            out.append({"path": str(p), "sha256": sha256_file(p), "bytes": p.stat().st_size})
    return out


def machine() -> dict:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "profile": os.environ.get("FOURLOOPS_MACHINE", "local"),
    }


def build_record(
    *,
    rule: str,
    wildcards: dict,
    params: dict,
    inputs: list,
    outputs: list,
    started: dt.datetime,
    wall_seconds: float,
    fields: dict,
) -> dict:
    record = {
        "schema": "fourloops.provenance/1",
        "rule": rule,
        "wildcards": wildcards,
        "params": params,
        "inputs": file_entries(inputs),
        "outputs": file_entries(outputs),
        "code": code_version(os.environ.get("FOURLOOPS_REPO")),
        "python": sys.version.split()[0],
        "packages": package_versions(),
        "gpu": gpu_info(),
        "machine": machine(),
        "started": started.isoformat(timespec="seconds"),
        "wall_seconds": round(wall_seconds, 3),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "peak_vram_gib": peak_vram_gib(),
        "peak_reserved_gib": peak_reserved_gib(),
        "cuda_allocator": cuda_allocator(),
        "invocation": os.environ.get("FOURLOOPS_INVOCATION", ""),
        **fields,
    }
    return redact_obj(record)
