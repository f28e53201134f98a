"""Does torch's allocator change a job's seconds? The same component probes, each in its own process, under the
default allocator and under expandable segments in turn (bench/gpu_run.sh `alloc_ab`).

    .venv/bin/python bench/alloc_ab.py RUN_DIR [--write]

RUN_DIR holds alloc_ab/records/<name>/*.json, bench/sizing_gpu.py's probe records; each record's own
`cuda_allocator` says which allocator its process ran under (not the folder's name). The seconds compared are the
ones a forecast is made of (fourloops.asks.Measurements.timing): the load, the first item, a steady item, and the
process from its imports to its record. --write puts the table beside the records as alloc_ab.md (a test regenerates
the committed one).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gpu_table import REPO, _span as _range, cli  # noqa: E402

from fourloops.asks import record_allocator  # noqa: E402

FIGURES = (("load s", "load_seconds"), ("first item s", "first_item_seconds"), ("s per item", "seconds_per_item"),
           ("imports to record s", "child_wall_seconds"))


def rows(run_dir: Path) -> list[dict]:
    out = []
    for path in sorted((run_dir / "alloc_ab" / "records").glob("*/*.json")):
        rec = json.loads(path.read_text())
        confs = rec.get("configurations") if isinstance(rec, dict) else None
        if not confs or confs[0].get("seconds_per_item") is None:
            continue  # builds.json, or a probe that failed
        out.append({"record": path.parent.name, "key": rec["key"], "allocator": record_allocator(rec).replace("_", " "),
                    "started": rec.get("started", ""), "load_seconds": rec["load_seconds"],
                    "first_item_seconds": confs[0]["first_item_seconds"],
                    "seconds_per_item": confs[0]["seconds_per_item"],
                    "child_wall_seconds": rec.get("child_wall_seconds")})
    return sorted(out, key=lambda r: (r["key"], r["started"], r["record"]))


def _span(xs: list[float]) -> str:
    return f"{_range(xs)} (mean {sum(xs) / len(xs):.3f}, {len(xs)})" if xs else "none"


def table(run_dir: Path) -> str:
    found = rows(run_dir)
    shown = run_dir.resolve()
    shown = shown.relative_to(REPO).as_posix() if shown.is_relative_to(REPO) else str(run_dir)
    lines = [f"# The allocator A/B of {run_dir.name}", "",
             f"Made by `.venv/bin/python bench/alloc_ab.py {shown} --write` from the probe records under "
             "alloc_ab/records (one process each, in the order they ran).", "",
             "| key | record | allocator | " + " | ".join(h for h, _ in FIGURES) + " |",
             "|---|---|---|" + "---|" * len(FIGURES)]
    for r in found:
        cells = [r["key"], r["record"], r["allocator"]] + [
            "-" if r[k] is None else f"{r[k]:.3f}" for _, k in FIGURES]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Summary", ""]
    for key in sorted({r["key"] for r in found}):
        for head, field in FIGURES:
            parts = []
            for alloc in ("default", "expandable segments"):
                xs = [r[field] for r in found if r["key"] == key and r["allocator"] == alloc and r[field] is not None]
                parts.append(f"{alloc} {_span(xs)}")
            lines.append(f"- {key}, {head}: " + "; ".join(parts))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    return cli(table, "alloc_ab.md", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
