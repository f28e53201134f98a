"""Before the first job of a real run: is every model, weight file and device the pending jobs need here?

A real run never falls back to the smoke models: what is missing is named, with how to get it.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

SMOKE_HINT = (
    "For a CPU run on the tiny smoke model set instead (outputs under smoke/, never published):\n"
    "    snakemake --profile profiles/smoke results/ladder.csv"
)


@dataclass(frozen=True)
class Need:
    """One thing a pending job needs: a device, a model snapshot, a checkpoint file or a package."""

    kind: str  # "device" | "hf_model" | "file" | "package"
    what: str
    revision: str | None = None
    rule: str = ""

    def key(self) -> tuple:
        return (self.kind, self.what, self.revision)


def hf_home() -> str:
    return os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")


def needs_for_job(rule: str, params: dict) -> list[Need]:
    """What a job of `rule` with resolved `params` needs on the machine that runs it (real model set)."""
    out: list[Need] = []
    if rule == "probe_model":  # one pass of each configured model
        return needs_for_job("generate", {"job": {"generator": params["generator"]}}) + needs_for_job(
            "keypoints", {"detector": params["detector"]}
        )
    if rule == "generate":
        gen = params["job"]["generator"]
        out.append(Need("device", gen["device"], rule=rule))
        if gen["backend"] == "omnigen2":
            out.append(Need("package", "omnigen2", rule=rule))
        if Path(os.path.expanduser(gen["model"])).is_dir():
            out.append(Need("file", os.path.expanduser(gen["model"]), rule=rule))
        else:
            out.append(Need("hf_model", gen["model"], gen["revision"], rule=rule))
    elif rule.startswith("keypoints"):
        det = params["detector"]
        out.append(Need("device", det["device"], rule=rule))
        out.append(Need("file", det["weights"], rule=rule))
    return out


def _cuda_devices() -> tuple[int, str]:
    try:
        import torch
    except ImportError as err:  # pragma: no cover - torch is a dependency
        return 0, f"torch cannot be imported ({err})"
    if not torch.cuda.is_available():
        return 0, f"torch {torch.__version__} sees no CUDA device"
    return torch.cuda.device_count(), ""


def check(need: Need) -> str | None:
    """None when the need is met here, else one line saying what is missing and how to get it."""
    if need.kind == "device":
        if need.what == "cpu":
            return None
        count, why = _cuda_devices()
        index = int(need.what.split(":")[1]) if ":" in need.what else 0
        if count <= index:
            return (
                f"device {need.what} (rule {need.rule}): {why or f'only {count} CUDA device(s)'}; "
                "run on a machine with an NVIDIA GPU (the desk or a pod), or set the rule's device to cpu"
            )
        return None
    if need.kind == "package":
        if importlib.util.find_spec(need.what) is None:
            return (
                f"package {need.what} (rule {need.rule}) is not installed; it is not on PyPI: install the "
                "pod environment: pip install -r envs/pod.txt && envs/omnigen2.sh"
            )
        return None
    if need.kind == "file":
        if not Path(need.what).exists():
            return (
                f"weights {need.what} (rule {need.rule}) do not exist; place the checkpoint there or set the "
                "config key that names it (keypoints.weights / generator.model)"
            )
        return None
    if need.kind == "hf_model":
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            snapshot_download(need.what, revision=need.revision, local_files_only=True)
        except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError) as err:
            return (
                f"model {need.what} at revision {need.revision} (rule {need.rule}) is not in the Hugging Face cache "
                f"(HF_HOME={hf_home()}): {type(err).__name__}; download it once with "
                f"`hf download {need.what} --revision {need.revision}` (HF_TOKEN in the environment for gated models)"
            )
        return None
    raise ValueError(f"unknown need kind {need.kind!r}")


def problems(jobs: list[tuple[str, dict]]) -> list[str]:
    """Check every distinct need of the pending jobs; return one line per unmet need."""
    seen: dict[tuple, Need] = {}
    for rule, params in jobs:
        for need in needs_for_job(rule, params):
            seen.setdefault(need.key(), need)
    return [msg for need in seen.values() if (msg := check(need))]


def report(lines: list[str]) -> str:
    return (
        "the real model set cannot run on this machine; nothing was started:\n  - "
        + "\n  - ".join(lines)
        + "\n"
        + SMOKE_HINT
    )
