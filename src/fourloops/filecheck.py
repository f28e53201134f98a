"""Is a file what it claims to be? Headers only, never a load: a safetensors file, a torch checkpoint, a
save_pretrained directory. The preflight names what is wrong before a real run; the body drops a damaged
Anny cache file with the same check."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

SAFETENSORS_MAX_HEADER = 100 * 2**20


def safetensors_problem(path: str | Path) -> str | None:
    """A safetensors file's header is read (8-byte length, JSON), and its tensors fit in the file."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return f"{path.name}: {size} bytes, too short for a safetensors header"
        n = int.from_bytes(head, "little")
        if n <= 0 or n > min(SAFETENSORS_MAX_HEADER, size - 8):
            return f"{path.name}: header length {n} does not fit its {size} bytes (not safetensors, or truncated)"
        try:
            header = json.loads(fh.read(n))
        except ValueError:
            return f"{path.name}: its header is not JSON (not safetensors)"
    end = max((int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"), default=0)
    if 8 + n + end > size:
        return f"{path.name}: truncated ({size} bytes, its header needs {8 + n + end})"
    return None


def checkpoint_problem(path: str | Path) -> str | None:
    """None when `path` is a torch checkpoint (a zip holding data.pkl, or a legacy pickle) or a
    safetensors file whose header reads; else what it is instead. Reads headers only, never loads."""
    path = Path(path)
    if not path.exists():
        return "does not exist"
    if not path.is_file():
        return "is not a file"
    if path.suffix == ".safetensors":
        return safetensors_problem(path)
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic[:1] == b"\x80" and len(magic) > 1 and 2 <= magic[1] <= 5:
        return None  # a legacy torch.save pickle
    if magic != b"PK\x03\x04":
        return f"is not a torch checkpoint (starts with {magic!r}, expected a zip archive)"
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError) as err:
        return f"is a damaged zip archive ({err})"
    if not any(n.endswith("/data.pkl") or n == "data.pkl" for n in names):
        return "is a zip archive without data.pkl (not a torch checkpoint)"
    return None


def model_dir_problem(path: str | Path) -> str | None:
    """None when `path` is a save_pretrained directory whose index and weight headers read."""
    path = Path(path)
    index = path / "model_index.json"
    if not index.is_file() and not (path / "config.json").is_file():
        return "holds neither model_index.json (a pipeline) nor config.json (a model)"
    folders = [path]
    if index.is_file():
        try:
            listing = json.loads(index.read_text(encoding="utf-8"))
        except ValueError:
            return "model_index.json is not JSON"
        folders = [path / name for name, value in listing.items()
                   if isinstance(value, list) and (path / name).is_dir()]
    for folder in folders:
        for weights in sorted(folder.glob("*.safetensors")):
            why = safetensors_problem(weights)
            if why:
                return f"{folder.name}/{why}"
    return None
