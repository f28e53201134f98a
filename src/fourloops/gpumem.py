"""What the driver saw of a job's process, and a cap that makes a large card act as a smaller one.

A wall is about what the driver sees (the CUDA context and torch's whole reserved pool, not only what torch
allocated), so every GPU job samples its own NVML entry while it runs and records the peak.

`FOURLOOPS_VRAM_CAP_GIB` is a machine setting, read where the job runs and never a param (it stales nothing):
with it a job's torch pool is capped (`torch.cuda.set_per_process_memory_fraction`) so that pool plus the CUDA
context this process holds when the cap is set stays under the cap. A 24 GiB desk is emulated on an H200 this
way; since the context can still grow after that (lazily loaded kernels), a capped job also records whether its
NVML peak stayed under the cap, and the confusion matrix reads both.
"""

from __future__ import annotations

LINEAGE = False  # how much a job's process held, never what it writes: not in any job's lineage

import os
import threading

GIB = 2**30
CAP_ENV = "FOURLOOPS_VRAM_CAP_GIB"


def cap_gib(environ=os.environ) -> float | None:
    """The cap from the environment, or None; a bad value raises naming the variable and what is allowed."""
    raw = environ.get(CAP_ENV)
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{CAP_ENV} = {raw!r}: not a number; allowed: GiB > 0, e.g. 24") from None
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"{CAP_ENV} = {raw!r}: allowed: a finite number of GiB > 0, e.g. 24")
    return value


def cap_fraction(cap: float, total_gib: float, context_gib: float) -> float:
    """The share of the card torch's pool may reserve so that pool + context stays under `cap`."""
    if cap >= total_gib:
        return 1.0
    return max(0.0, (cap - context_gib)) / total_gib


class NvmlPeak:
    """Samples this process's NVML memory on every card in a daemon thread; `stop()` returns the peak.

    Where NVML lists no process (a container's own pid namespace) the card's used memory over the
    baseline taken at start stands in, and the record says which source it was."""

    def __init__(self, interval_s: float = 0.05, pid: int | None = None):
        self.interval_s = interval_s
        self.pid = os.getpid() if pid is None else pid
        self.peak_gib = 0.0
        self.source = None
        self._stop = threading.Event()
        self._thread = None
        self._nvml = None
        self._handles = []
        self._baseline = []

    def start(self) -> "NvmlPeak":
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception:  # noqa: BLE001 - no NVIDIA driver or no pynvml: nothing to sample
            return self
        self._nvml = pynvml
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        self._baseline = [pynvml.nvmlDeviceGetMemoryInfo(h).used for h in self._handles]
        self._thread = threading.Thread(target=self._run, name="fourloops-nvml-peak", daemon=True)
        self._thread.start()
        return self

    def own_gib(self) -> float | None:
        """This process's NVML memory now (GiB, summed over cards), or None without NVML."""
        if self._nvml is None:
            return None
        total, listed = 0, False
        for h, base in zip(self._handles, self._baseline):
            try:
                procs = self._nvml.nvmlDeviceGetComputeRunningProcesses(h)
            except self._nvml.NVMLError:
                procs = []
            mine = [p for p in procs if p.pid == self.pid and getattr(p, "usedGpuMemory", None)]
            if mine:
                listed = True
                total += sum(p.usedGpuMemory for p in mine)
            elif not procs:
                total += max(0, self._nvml.nvmlDeviceGetMemoryInfo(h).used - base)
        self.source = ("nvmlDeviceGetComputeRunningProcesses, this pid" if listed
                       else self.source or "card used minus its baseline at the job's start (NVML lists no process)")
        return total / GIB

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            now = self.own_gib()
            if now is not None and now > self.peak_gib:
                self.peak_gib = now

    def stop(self) -> dict:
        if self._thread is None:
            return {"nvml_peak_gib": None, "nvml_source": "no NVML (pynvml missing or no driver)"}
        self._stop.set()
        self._thread.join(timeout=5)
        last = self.own_gib() or 0.0
        self.peak_gib = max(self.peak_gib, last)
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass
        if not self.peak_gib:
            return {"nvml_peak_gib": None, "nvml_source": "the process never held GPU memory"}
        return {"nvml_peak_gib": round(self.peak_gib, 4), "nvml_source": self.source,
                "nvml_interval_s": self.interval_s}


class AllocatorError(RuntimeError):
    """The machine asks for an allocator setting this process's torch did not take."""


def allocator_named(environ=os.environ) -> str | None:
    """The allocator torch's own variables in `environ` ask for: "expandable_segments" or "default" where either is
    set (a user's own setting, which stands over the machine's: rules/common.smk), None where neither is."""
    from fourloops.provenance import ALLOC_ENV

    conf = ",".join(environ.get(name, "") for name in ALLOC_ENV)
    if not conf.strip(","):
        return None
    return "expandable_segments" if "expandable_segments:true" in conf.replace(" ", "").lower() else "default"


def check_allocator(environ=os.environ) -> dict | None:
    """Where the job's environment asks torch for expandable segments (fourloops.card.set_allocator_env: the machine's
    machines.yaml `cuda_allocator`, set by the Snakemake that starts the job, or the user's own setting), check that
    torch took it: the walls asked by that allocator's overheads (fourloops.asks.for_allocator). None where nothing
    asks for it; an AllocatorError, before the job loads anything, where torch runs without expandable segments. Its
    keys sit beside the record's own `cuda_allocator` (fourloops.provenance: the environment and torch's snapshot)
    without replacing it (older records had theirs replaced by the string)."""
    from fourloops.provenance import ALLOC_ENV, cuda_allocator

    if allocator_named(environ) != "expandable_segments":
        return None
    conf = ",".join(environ.get(name, "") for name in ALLOC_ENV)
    import torch

    if not torch.cuda.is_available():
        return {"cuda_allocator_asked": "expandable_segments", "cuda_allocator_applied": False,
                "cuda_allocator_note": "no CUDA device: nothing to check"}
    torch.empty(1, device="cuda")
    if not (cuda_allocator() or {}).get("expandable_segments"):
        raise AllocatorError(
            f"PYTORCH_CUDA_ALLOC_CONF = {conf.strip(',')!r} (config/machines.yaml: this machine's cuda_allocator = "
            f"'expandable_segments', or your own setting), but torch {torch.__version__} here did not take it: its "
            "segments are not expandable; allowed: cuda_allocator: default for this machine and no expandable_segments "
            "in PYTORCH_CUDA_ALLOC_CONF (the walls then ask by process_overhead)")
    return {"cuda_allocator_asked": "expandable_segments", "cuda_allocator_applied": True}


def apply_cap(environ=os.environ) -> dict | None:
    """Cap this process's torch pool from FOURLOOPS_VRAM_CAP_GIB (initialises CUDA; only when the variable is set)."""
    cap = cap_gib(environ)
    if cap is None:
        return None
    import torch

    if not torch.cuda.is_available():
        return {"vram_cap_gib": cap, "vram_cap_applied": False, "vram_cap_note": "no CUDA device: nothing to cap"}
    torch.cuda.init()
    torch.empty(1, device="cuda")  # make the context exist, so its size is what the cap leaves room for
    probe = NvmlPeak()
    probe.start()
    context = probe.own_gib() or 0.0
    probe.stop()
    out = []
    for i in range(torch.cuda.device_count()):
        total = torch.cuda.get_device_properties(i).total_memory / GIB
        fraction = cap_fraction(cap, total, context)
        torch.cuda.set_per_process_memory_fraction(fraction, i)
        out.append(round(fraction, 5))
    return {"vram_cap_gib": cap, "vram_cap_applied": True, "vram_cap_fractions": out,
            "vram_cap_context_gib": round(context, 4)}
