"""Where a model's files are: a local directory, or a hub id resolved to its snapshot in the local Hugging Face
cache (`local_files_only=True`: never a download, except on a rented pod, where FETCH_ENV is set). The generator,
the LoRA stages and the scorer all resolve their weights here."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

# Set in a rented pod's environment by the RunPod executor: there, a hub model missing from the cache is
# downloaded once (the pod's container disk keeps it across jobs). Nowhere else does anything download.
FETCH_ENV = "FOURLOOPS_FETCH_MODELS"


class GeneratorUnavailable(RuntimeError):
    """The generator cannot be loaded in this environment (missing package, weights or device)."""


class ModelNotCached(GeneratorUnavailable):
    """A hub id was asked for whose snapshot is not in the local Hugging Face cache."""



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
