"""publish.artifacts (paths or glob patterns) -> the artifacts to judge."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from fourloops.gate.refusals import Refusal
from fourloops.records import norm

KINDS = ("corpus", "deliverable", "report")


@dataclass(frozen=True)
class Artifact:
    path: str                      # relative to the working directory
    kind: str                      # corpus | deliverable | report
    allow_precisions: tuple = ()   # quantised precisions this corpus may carry (rule 2)

    @property
    def name(self) -> str:
        """Where it lands under results/published/: its path without the leading results/."""
        parts = Path(self.path).parts
        return str(Path(*parts[1:])) if len(parts) > 1 and parts[0] == "results" else self.path


def expand_artifacts(
    listing: Iterable[dict], workdir: str | Path, out: str = "results/published"
) -> tuple[list[Artifact], list[Refusal]]:
    """Config entries (path or glob pattern, kind, allow_precisions) -> artifacts; a pattern matching
    nothing is refused (rule 5). A pattern never matches the publication itself (nor its temporaries)."""
    workdir = Path(workdir)
    out_dir, out_name = os.path.dirname(norm(out)), os.path.basename(norm(out))

    def ours(rel: str) -> bool:
        head = rel[len(out_dir) + 1:] if out_dir and rel.startswith(out_dir + os.sep) else rel
        first = head.split(os.sep, 1)[0]
        return first == out_name or first.startswith(f".{out_name}-")
    artifacts, refusals, seen = [], [], set()
    for entry in listing:
        pattern, kind = entry["path"], entry.get("kind", "corpus")
        allow = tuple(p.lower() for p in entry.get("allow_precisions", []) or [])
        if glob.has_magic(pattern):
            matches = sorted(
                os.path.relpath(p, workdir)
                for p in glob.glob(str(workdir / pattern), recursive=True)
                if os.path.isfile(p) and not ours(os.path.relpath(p, workdir))
            )
            if not matches:
                refusals.append(Refusal(pattern, 5, "the pattern matches no file",
                                        "build it first, or correct publish.artifacts"))
        else:
            matches = [pattern]
        for path in matches:
            path = norm(path)
            if path in seen:
                continue
            seen.add(path)
            artifacts.append(Artifact(path, kind, allow))
    return artifacts, refusals
