"""The seconds forecast of a GPU run's jobs, as the plan made before the run had it and as today's code has it from
the same probes, against what each job took.

    .venv/bin/python bench/gpu_forecast.py RUN_DIR [--write]

RUN_DIR as for bench/gpu_table.py, with the run's probes (sizing/results/probe/<machine>/*.json) and their jobs'
provenance. Today's forecast is `fourloops plan --workflow-profile profiles/sizing-gpu` in a scratch directory that
holds only those probes, so it reads nothing of the jobs it is compared with. --write puts forecast.md beside them.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

import gpu_table  # noqa: E402

TARGETS = ["results/ladder.csv", "results/drift/watercolor.csv", "results/grades/watercolor.csv"]


def replan(run_dir: Path) -> dict:
    """(rule, wildcards json) -> (seconds, source) from today's plan over the run's probes only."""
    from fourloops import plan

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for sub in ("results/probe", "results/provenance/probe"):
            shutil.copytree(run_dir / "sizing" / sub, work / sub)
        args = ["-s", str(REPO / "Snakefile"), "--directory", str(work),
                "--workflow-profile", str(REPO / "profiles" / "sizing-gpu"), "--", *TARGETS]
        with contextlib.redirect_stdout(io.StringIO()):
            result = plan.run(args, None)
    return {(j["rule"], json.dumps(j.get("wildcards") or {}, sort_keys=True)): (float(j["seconds"]), j["seconds_source"])
            for j in result["jobs"]}


def table(run_dir: Path) -> str:
    records = [json.loads(p.read_text()) for p in sorted(run_dir.rglob("provenance/**/*.json"))]
    before = gpu_table.forecasts(json.loads((run_dir / "plan-before.json").read_text()))
    now = replan(run_dir)
    rows, ratios = [], {"before": [], "now": []}
    for rec in sorted(records, key=lambda r: (r["rule"], gpu_table._job(r))):
        key = (rec["rule"], json.dumps(rec.get("wildcards") or {}, sort_keys=True))
        if key not in before or not before[key][1] or rec.get("wall_seconds") is None:
            continue  # only the jobs a probe timed
        actual = float(rec["wall_seconds"])
        was, (new, source) = before[key][0], now[key]
        ratios["before"].append(was / actual)
        ratios["now"].append(new / actual)
        rows.append(f"| {rec['rule']} | {gpu_table._job(rec)} | {was:.1f} | {new:.1f} | {actual:.1f} | "
                    f"{was / actual:.3f} | {new / actual:.3f} | {source.split('.json: ', 1)[-1]} |")
    shown = run_dir.resolve().relative_to(REPO) if run_dir.resolve().is_relative_to(REPO) else run_dir
    span = {k: gpu_table._span(v) for k, v in ratios.items()}
    return "\n".join([
        f"# Forecast seconds of the probe-timed jobs of {run_dir.name}, then and now", "",
        f"Made by `.venv/bin/python bench/gpu_forecast.py {shown.as_posix()} --write`. 'then': the plan made before the",
        "run; 'now': today's plan from the same probes only. The form of 'now' (warm-up and process start once per",
        "job) was chosen after these actual seconds were seen; its figures come from the probes alone.", "",
        "| rule | job | then s | now s | actual s | then/actual | now/actual | now, from the probe |",
        "|---|---|---|---|---|---|---|---|", *rows, "", "## Summary", "",
        f"- probe-timed jobs: {len(rows)}, forecast/actual then {span['before']}, now {span['now']}", ""])


def main(argv=None) -> int:
    return gpu_table.cli(table, "forecast.md", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
