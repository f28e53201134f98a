"""The same GPU jobs twice on one machine in one session: how far a job's seconds move when nothing but the run
changes, the floor under any forecast's error.

    .venv/bin/python bench/gpu_repeat.py REPEAT_DIR [--write]

REPEAT_DIR holds the second pass's provenance records and Snakemake benchmark files (bench/gpu_run.sh `repeat`:
`--forcerun generate` of the ladder after the whole DAG); FIRST_DIR, the run it repeats, is REPEAT_DIR without its
"-repeat" suffix. Two measures of a job's seconds: the provenance's wall (the job's own code, from its context's
start to its record) and Snakemake's benchmark (the whole job: interpreter, imports, teardown), which is what
`fourloops plan` forecasts a job from once it has run (fourloops.records.benchmark_seconds). --write puts the table
beside the records as repeat.md (a test regenerates the committed one).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gpu_table import REPO, _job, cli  # noqa: E402

from fourloops.records import benchmark_seconds  # noqa: E402

WITHIN = 0.20  # the forecast goal: within 20% of the actual seconds


def _jobs(run_dir: Path) -> dict[tuple[str, str], dict]:
    out = {}
    for path in sorted(run_dir.glob("sizing/results/provenance/*/*.json")):
        rec = json.loads(path.read_text())
        if rec.get("nvml_peak_gib") is None:
            continue  # a job on no card
        bench = run_dir / "sizing" / "benchmarks" / path.parent.name / path.name.replace(".json", ".tsv")
        out[(rec["rule"], _job(rec))] = {"wall": rec["wall_seconds"], "bench": benchmark_seconds(str(bench))}
    return out


def _span(xs: list[float]) -> str:
    return f"{min(xs):.3f}-{max(xs):.3f}" if xs else "none"


def table(repeat_dir: Path) -> str:
    first_dir = repeat_dir.with_name(repeat_dir.name.removesuffix("-repeat"))
    first, second = _jobs(first_dir), _jobs(repeat_dir)
    rows = []
    for key in sorted(second):
        a, b = first[key], second[key]
        ratio = (a["bench"] / b["bench"]) if a["bench"] and b["bench"] else None
        rows.append((key, a, b, a["wall"] / b["wall"], ratio))
    shown = repeat_dir.resolve()
    shown = shown.relative_to(REPO).as_posix() if shown.is_relative_to(REPO) else str(repeat_dir)
    lines = [f"# The same jobs twice: {first_dir.name} and its repeat", "",
             f"Made by `.venv/bin/python bench/gpu_repeat.py {shown} --write` from both passes' provenance records and "
             "Snakemake benchmark files. first/second: the first pass's seconds over the second's; the benchmark's is "
             "the forecast `fourloops plan` makes for a job that ran before (its benchmark history) against what the "
             "job then took.", "",
             "| rule | job | wall s, first | wall s, second | first/second | benchmark s, first | benchmark s, second "
             "| first/second |", "|---|---|---|---|---|---|---|---|"]
    for (rule, job), a, b, wall, bench in rows:
        cells = [rule, job, f"{a['wall']:.3f}", f"{b['wall']:.3f}", f"{wall:.3f}",
                 "-" if a["bench"] is None else f"{a['bench']:.2f}", "-" if b["bench"] is None else f"{b['bench']:.2f}",
                 "-" if bench is None else f"{bench:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    walls = [r[3] for r in rows]
    benches = [r[4] for r in rows if r[4] is not None]
    lines += ["", "## Summary", "",
              f"- jobs run twice: {len(rows)}; wall first/second {_span(walls)}; benchmark first/second (the rerun's "
              f"forecast from benchmark history) {_span(benches)}, within 20%: "
              f"{sum(abs(x - 1) <= WITHIN for x in benches)} of {len(benches)}"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    return cli(table, "repeat.md", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
