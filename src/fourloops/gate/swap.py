"""The publication built beside the old one and swapped in whole (renameat2 RENAME_EXCHANGE)."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable

from fourloops.gate.listing import Artifact
from fourloops.gate.manifest import MANIFEST
from fourloops.io import sha256_file


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directories (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    rc = fn(AT_FDCWD, os.fsencode(str(a)), AT_FDCWD, os.fsencode(str(b)), RENAME_EXCHANGE)
    return rc == 0


def publish(
    workdir: str | Path,
    artifacts: list[Artifact],
    manifest: dict,
    *,
    out: str = "results/published",
    records: Iterable[str] = (),
) -> Path:
    """Build the publication in a temporary folder beside `out`, then swap it in; the old one is removed
    only after the swap. A file whose bytes changed since they were judged aborts, leaving `out` as it was."""
    workdir = Path(workdir)
    final = workdir / out
    final.parent.mkdir(parents=True, exist_ok=True)
    # named as fourloops.io's temporaries (`.<name>.<random>.partial`): a killed run's is cleared by the next
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-new-", suffix=".partial", dir=final.parent))
    try:
        for art in artifacts:
            dest = tmp / art.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(workdir / art.path, dest)
            want = manifest["artifacts"][art.name]["sha256"]
            if sha256_file(dest) != want:
                raise RuntimeError(f"{art.path} changed while it was being published; nothing was published")
        for rec in sorted(set(records)):
            if rec.startswith("results/provenance/"):
                dest = tmp / "provenance" / Path(rec).relative_to("results/provenance")
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(workdir / rec, dest)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if final.exists():
            if _exchange(tmp, final):
                shutil.rmtree(tmp)          # tmp now holds the old publication
            else:
                old = Path(tempfile.mkdtemp(prefix=f".{final.name}-old-", dir=final.parent))
                os.rmdir(old)
                os.rename(final, old)
                try:
                    os.rename(tmp, final)
                except OSError:
                    os.rename(old, final)
                    raise
                shutil.rmtree(old)
        else:
            os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
