"""Before the first job: every folder the pending jobs write can be written and has room for what they wrote
last time. Snakemake deletes a job's outputs (and its record) just before it runs, so a disk found full or
read-only inside the job has already cost the last generation; found here, nothing is touched. Inside a job,
the same conditions end in one line (`one_line`), not a traceback.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import Mapping

# What a disk, not the job, is to blame for.
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _existing(path: Path) -> Path:
    """The nearest folder at or above `path`'s folder that exists (where a job's makedirs starts)."""
    d = path.parent
    while not d.is_dir() and d != d.parent:
        d = d.parent
    return d


def _free(folder: Path) -> int:
    return shutil.disk_usage(folder).free


def problems(outputs: Mapping[str, int], root: str | os.PathLike = ".") -> list[str]:
    """`outputs`: each file the pending jobs will write -> the bytes it took last time (0: not known).
    One line per folder that cannot be written and per filesystem without the room; [] when all is well."""
    root = Path(root)
    folders: dict[Path, list[str]] = {}
    for path in outputs:
        folders.setdefault(_existing(root / path), []).append(path)
    found, need_by_fs = [], {}
    for folder, paths in sorted(folders.items()):
        try:
            fd, probe = tempfile.mkstemp(prefix=".fourloops-probe-", dir=folder)
            os.close(fd)
            os.unlink(probe)
        except OSError as err:
            found.append(f"{folder}: cannot be written ({err.strerror}; {human(_free(folder))} free on its filesystem); "
                         f"{len(paths)} output(s) of the pending jobs go under it, e.g. {paths[0]}; allowed: a writable "
                         "folder with room (nothing was run or written)")
            continue
        need, first = need_by_fs.get(folder.stat().st_dev, (0, folder))
        need_by_fs[folder.stat().st_dev] = (need + sum(outputs[p] for p in paths), first)
    for need, folder in need_by_fs.values():
        free = _free(folder)
        if need > free:
            found.append(f"{folder}: no room: {human(free)} free on its filesystem, and the pending jobs' outputs there "
                         f"took {human(need)} last time (their provenance records); allowed: free {human(need - free)} "
                         "more, or run in another working directory (nothing was run or written)")
    return found


def one_line(err: OSError, where: str | os.PathLike = ".") -> str | None:
    """A job's disk error as one line naming the path (`where` when the error names none: a write's does not),
    the error and the free space (None: not a disk error)."""
    if err.errno not in DISK_ERRNOS:
        return None
    path = Path(err.filename or where)
    try:
        free = human(_free(_existing(path) if not path.is_dir() else path))
    except OSError:
        free = "unknown"
    return (f"{path}: {err.strerror} ({free} free on its filesystem); the job wrote nothing that looks complete: "
            "free space or make the folder writable, then run again")
