"""Before the first job of a real run: is every model, weight file and device the pending jobs need here?

A real run never falls back to the smoke models: what is missing is named, with how to get it.
"""

from __future__ import annotations

from collections.abc import Iterable

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import importlib.util
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from fourloops.filecheck import checkpoint_problem, model_dir_problem

SMOKE_HINT = (
    "For a CPU run on the tiny smoke model set instead (outputs under smoke/, never published):\n"
    "    snakemake --workflow-profile profiles/smoke results/ladder.csv"
)


@dataclass(frozen=True)
class Need:
    """One thing a pending job needs: a device, a model snapshot, a checkpoint file or a package."""

    kind: str  # "device" | "hf_model" | "checkpoint" | "model_dir" | "adapter_dir" | "package" | "executable" | "dfc"
    #            | "unpinned" | "revision_for_dir" (the last two are the config's: CONFIG_KINDS)
    what: str  # "unpinned": a hub id whose revision config key (in `revision`) holds no commit
    revision: str | None = None
    rule: str = ""
    # "unpinned", "revision_for_dir": what the revision key holds (None: unset; else a branch, a tag or a short hash);
    # "model_dir", "adapter_dir": the config key that names the directory
    value: str | None = None

    def key(self) -> tuple:
        return (self.kind, self.what, self.revision)


def generator_needs(gen: dict, rule: str) -> list[Need]:
    """A real generator load: its device, its package, its weights (a local directory or a hub snapshot). Here, not
    in the generate stage, so the LoRA stages that load the same generator's parts need nothing of its inference."""
    out = [Need("device", gen["device"], rule=rule)]
    if gen["backend"] == "omnigen2":
        out.append(Need("package", "omnigen2", rule=rule))
    out.append(weights_need(gen["model"], gen.get("revision"), "generator.model", "generator.revision", rule))
    return out


COMMIT = re.compile(r"[0-9a-f]{40}")
# A config that a run would refuse wherever its jobs run (a pod's or a node's machine needs are met there)
CONFIG_KINDS = frozenset({"unpinned", "revision_for_dir"})


def weights_need(model: str, revision: str | None, model_key: str, revision_key: str, rule: str,
                 kind: str = "model_dir") -> Need:
    """Where the loaders find `model` (fourloops.hub.resolve_model's rule: an existing path, or a name shaped like
    one): a local directory, checked as `kind` (a save_pretrained model, or a PEFT adapter: "adapter_dir"), whose
    revision must be unset (the loader refuses one, in the job); else a hub id, pinned at a commit (hub_need)."""
    from fourloops.model_sets import is_local

    local = os.path.expanduser(model)
    if is_local(model):
        if revision is not None:
            return Need("revision_for_dir", local, revision_key, rule=rule, value=revision)
        return Need(kind, local, rule=rule, value=model_key)
    return hub_need(model, revision, revision_key, rule)


def hub_need(model: str, revision: str | None, key: str, rule: str) -> Need:
    """A hub model's weights: its snapshot at `revision` when that is a commit; else an `unpinned` need naming the
    config `key`. A branch or a tag (`main`) is where the hub's owner points it, so a rerun, a second machine or a
    pod's fresh download could load other weights under the same params: a real run loads pinned weights only."""
    if revision is not None and COMMIT.fullmatch(revision):
        return Need("hf_model", model, revision, rule=rule)
    return Need("unpinned", model, key, rule=rule, value=revision)


def hf_home() -> str:
    return os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")


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
        if need.what == "hailo_usb":
            return hailo_device_problem(need.rule)
        count, why = _cuda_devices()
        index = int(need.what.split(":")[1]) if ":" in need.what else 0
        if count <= index:
            return (
                f"device {need.what} (rule {need.rule}): {why or f'only {count} CUDA device(s)'}; "
                "run on a machine with an NVIDIA GPU (the desk or a pod), or set the rule's device to cpu"
            )
        return None
    if need.kind == "executable":
        if shutil.which(need.what) is None:
            from fourloops.hailort import HAILORT_DOWNLOAD

            where = f"; install HailoRT from {HAILORT_DOWNLOAD}" if need.what == "hailortcli" else ""
            return f"executable {need.what} (rule {need.rule}) is not on PATH{where}"
        return None
    if need.kind == "dfc":  # where the compile runs: FOURLOOPS_DFC_PYTHON's interpreter when set, else here
        from fourloops.dfc import installed_problem

        problem = installed_problem(need.what or None)
        return f"rule {need.rule}: {problem}" if problem else None
    if need.kind == "package":
        if importlib.util.find_spec(need.what) is None:
            if need.what != "omnigen2":
                return (f"package {need.what} (rule {need.rule}) is not installed; install the pod environment, "
                        "which pins it: pip install -r envs/pod.txt")
            return (
                f"package {need.what} (rule {need.rule}) is not installed; it is not on PyPI: install the "
                "pod environment: pip install -r envs/pod.txt && envs/omnigen2.sh"
            )
        return None
    if need.kind == "unpinned":  # a real run loads pinned weights only
        said = ("is not set" if need.value is None else
                f"= {need.value!r} is not a commit (40 hex digits; a branch or a tag moves when the hub's owner moves it)")
        return (f"config {need.revision} {said} (rule {need.rule}): pin the hub commit of {need.what} "
                f"(`hf download {need.what}` prints the snapshot path; its last part is the commit)")
    if need.kind == "checkpoint":
        why = checkpoint_problem(need.what)
        if why:
            return (
                f"weights {need.what} (rule {need.rule}): {why}; place the RF-DETR checkpoint there or set the "
                "config key that names it (keypoints.weights)"
            )
        return None
    if need.kind == "revision_for_dir":
        return (f"config {need.revision} = {need.value!r} was given for the local directory {need.what} (rule "
                f"{need.rule}); a revision pins a hub id, and a directory is pinned by its bytes: set {need.revision} "
                "to null, or name the hub id instead of the directory")
    if need.kind in ("model_dir", "adapter_dir"):
        key = need.value  # weights_need names it
        if not Path(need.what).is_dir():
            why = "does not exist (or is not a directory)"
        elif need.kind == "adapter_dir":
            why = None if (Path(need.what) / "adapter_config.json").is_file() else "holds no adapter_config.json"
        else:
            why = model_dir_problem(need.what)
        if why:
            what = "a PEFT adapter directory" if need.kind == "adapter_dir" else "a save_pretrained directory"
            return (f"{need.kind.split('_')[0]} directory {need.what} (config {key}, rule {need.rule}): {why}; point "
                    f"{key} at {what} or a Hugging Face id")
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


def hailo_device_problem(rule: str) -> str | None:
    """None when `hailortcli scan` lists a Hailo device here."""
    import subprocess

    if shutil.which("hailortcli") is None:
        return (f"device hailo_usb (rule {rule}): hailortcli is not on PATH, so no Hailo device can be found; "
                "install HailoRT on the desk and plug in the Hailo USB device")
    try:
        proc = subprocess.run(["hailortcli", "scan"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"device hailo_usb (rule {rule}): hailortcli scan failed ({err})"
    if proc.returncode != 0 or "Device" not in proc.stdout:
        return (f"device hailo_usb (rule {rule}): hailortcli scan finds no Hailo device "
                f"({(proc.stdout + proc.stderr).strip()[:200] or 'no output'}); plug it in (the desk: usb/004:013, "
                "RFD 1163) and attach it to WSL (usbipd attach)")
    return None


def problems(needs: Iterable[Need], built: Iterable[str] = ()) -> list[str]:
    """Check every distinct need of the pending jobs (their stages declare them: fourloops.stage.Stage.needs_for);
    return one line per unmet need. A model file or directory
    under one of `built` (outputs of the run's own jobs: the sizing set's models) is made by the run, not missing."""
    made = [os.path.abspath(os.path.expanduser(p)) for p in built]

    def by_the_run(need: Need) -> bool:
        # a model the run builds does not exist yet, so a need for it reads as a hub id ("hf_model", "unpinned")
        if need.kind not in ("model_dir", "adapter_dir", "checkpoint", "hf_model", "unpinned"):
            return False
        what = os.path.abspath(os.path.expanduser(str(need.what)))
        return any(what == m or what.startswith(m.rstrip(os.sep) + os.sep) for m in made)

    seen: dict[tuple, Need] = {}
    for need in sorted(needs, key=lambda n: n.rule):  # a need several rules share is named by the first rule: the
        seen.setdefault(need.key(), need)            # same one whatever order Snakemake lists the jobs in
    return [msg for need in seen.values() if not by_the_run(need) and (msg := check(need))]


def report(lines: list[str], model_set: str = "real") -> str:
    return (
        f"the {model_set} model set cannot run on this machine; nothing was started:\n  - "
        + "\n  - ".join(lines)
        + "\n"
        + SMOKE_HINT
    )
