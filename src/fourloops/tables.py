"""Plain-text tables for the terminal: the wall table, the gate's refusal table, the plan.

Columns are padded to their widest cell except the last, which runs free (sources, evidence and
reasons are long); an optional rule line under the header.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from typing import Iterable, Sequence


def format_table(
    header: Sequence[str], rows: Iterable[Sequence[object]], *, indent: str = "", rule: bool = False
) -> str:
    cells = [tuple(str(c) for c in header)] + [tuple("" if c is None else str(c) for c in r) for r in rows]
    n = len(header)
    widths = [max(len(c[i]) for c in cells) for i in range(n - 1)]
    if rule:
        cells.insert(1, tuple("-" * w for w in widths) + ("-" * max(10, len(header[-1])),))
    lines = []
    for c in cells:
        lines.append(indent + "  ".join(c[i].ljust(widths[i]) for i in range(n - 1)) + "  " + c[n - 1])
    return "\n".join(lines)


def gib(x: float) -> str:
    return f"{x:.2f} GiB"


def hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
