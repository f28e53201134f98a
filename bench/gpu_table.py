"""One row per job of a GPU run, from its provenance records and the plan made before it: what the wall asked,
what torch and the driver then saw, and the forecast seconds against the actual (in all, and the model load's part).

    .venv/bin/python bench/gpu_table.py RUN_DIR [--write]

RUN_DIR holds what bench/gpu_run.sh brought back, unpacked: sizing/results/provenance/**.json and plan-before.json.
--write puts the table beside them as table.md (a test regenerates a committed table from its committed records).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

COLUMNS = ("rule", "job", "asked GiB", "torch peak GiB", "reserved GiB", "NVML peak GiB", "asked/NVML",
           "forecast s", "actual s", "forecast/actual", "load forecast s", "load actual s", "GPU", "driver", "torch",
           "commit")
REPO = Path(__file__).resolve().parents[1]
MIB = 2**20
GIB = 2**30


def _job(record: dict) -> str:
    wc = record.get("wildcards") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(wc.items())) or "-"


# the load a forecast from a probe counts once per job (fourloops.asks.Measurements.timing names it "load N s")
LOAD_PART = re.compile(r": load ([0-9.]+) s \+")


def forecasts(plan: dict | None) -> dict:
    """(rule, wildcards) -> (the plan's forecast seconds, whether a probe measured it, the load it counts or None)."""
    out = {}
    for job in (plan or {}).get("jobs") or []:
        source = str(job.get("seconds_source", ""))
        load = LOAD_PART.search(source)
        out[(job["rule"], json.dumps(job.get("wildcards") or {}, sort_keys=True))] = (
            float(job["seconds"]), source.startswith("measured"), float(load.group(1)) if load else None)
    return out


def load_seconds(rec: dict, workdir: Path | None = None) -> float | None:
    """The job's own model load, where its record says (provenance `timing`; a LoRA training job's `load_seconds`),
    else where its views manifest does (a generate or restyle job's views.json under `workdir`: older records keep it
    there alone)."""
    found = (rec.get("timing") or {}).get("load_seconds", rec.get("load_seconds"))
    if found is None and workdir is not None:
        for out in rec.get("outputs") or []:
            path = workdir / str(out.get("path", "")) if isinstance(out, dict) else None
            if path is not None and path.name == "views.json" and path.is_file():
                found = json.loads(path.read_text()).get("load_seconds")
    return None if found is None else float(found)


# The rules that make and measure the sizing models before the plan exists; every other GPU rule is a DAG job.
SETUP_RULES = ("sizing_model", "probe_model")
ON_CARD_GIB = 0.01  # an NVML peak below this: the process never allocated on the card


def rows(records: list[dict], plan: dict | None, workdir: Path | None = None) -> list[dict]:
    fc = forecasts(plan)
    out = []
    for rec in records:
        asked_mb = float((rec.get("resources") or {}).get("vram_mb") or 0)
        if not asked_mb and rec.get("nvml_peak_gib") is None:
            continue  # a CPU job: no wall on a card
        asked = asked_mb * MIB / GIB
        nvml = rec.get("nvml_peak_gib")
        forecast, probed, load = fc.get((rec["rule"], json.dumps(rec.get("wildcards") or {}, sort_keys=True)),
                                        (None, False, None))
        gpu = (rec.get("gpu") or {}).get("gpus") or [{}]
        out.append({
            "rule": rec["rule"], "job": _job(rec), "asked GiB": asked, "torch peak GiB": rec.get("peak_vram_gib"),
            "reserved GiB": rec.get("peak_reserved_gib"), "NVML peak GiB": nvml,
            "asked/NVML": asked / nvml if nvml and nvml >= ON_CARD_GIB else None, "probed": probed, "forecast s": forecast, "actual s": rec.get("wall_seconds"),
            "forecast/actual": forecast / rec["wall_seconds"] if forecast and rec.get("wall_seconds") else None,
            "load forecast s": load, "load actual s": load_seconds(rec, workdir) if rec["rule"] not in SETUP_RULES else None,
            "GPU": gpu[0].get("name"), "driver": (rec.get("gpu") or {}).get("driver"),
            "torch": (rec.get("packages") or {}).get("torch"),
            "commit": ((rec.get("code") or {}).get("commit") or "")[:7] + ("-dirty" if (rec.get("code") or {}).get("dirty") else ""),
        })
    return sorted(out, key=lambda r: (r["rule"], r["job"]))


def _cell(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def carried(run_dir: Path) -> set[str]:
    """The files the run carried from an earlier one (its carried.txt, written by bench/gpu_run.sh before any job):
    the earlier run's records, tabled with that run."""
    listed = run_dir / "carried.txt"
    return set(listed.read_text().split()) if listed.exists() else set()


def table(run_dir: Path) -> str:
    skip = carried(run_dir)
    records = [json.loads(p.read_text()) for p in sorted(run_dir.rglob("provenance/**/*.json"))
               if p.relative_to(run_dir).as_posix() not in skip]
    plan_path = run_dir / "plan-before.json"
    plan = json.loads(plan_path.read_text()) if plan_path.exists() else None
    body = rows(records, plan, run_dir / "sizing")
    shown = run_dir.resolve()
    shown = shown.relative_to(REPO) if shown.is_relative_to(REPO) else run_dir
    lines = [f"# Every GPU job of the run in {run_dir.name}", "",
             f"Made by `.venv/bin/python bench/gpu_table.py {shown.as_posix()} --write` from its provenance records"
             " and the plan made before the run." + (f" Left out: {len(skip)} files the run carried from an earlier "
                                                     "one (carried.txt)." if skip else ""), "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cell(r[c]) for c in COLUMNS) + " |" for r in body]
    below = [r for r in body if r["asked/NVML"] is not None and r["asked/NVML"] < 1]
    lines += ["", f"GPU jobs: {len(body)}; asked below what the driver saw: {len(below)}"
              + ("" if not below else " (" + ", ".join(f"{r['rule']} {r['job']}" for r in below) + ")")]
    return "\n".join(lines + ["", "## Summary", ""] + [f"- {line}" for line in summary(body)]) + "\n"


def _span(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}" if values else "none"


def summary(body: list[dict]) -> list[str]:
    """The lines the README quotes: the DAG's jobs apart from the builds and probes that came before the plan."""
    dag = [r for r in body if r["rule"] not in SETUP_RULES]
    ratio = [r["asked/NVML"] for r in dag if r["asked/NVML"] is not None]
    dirty = [r for r in body if r["commit"].endswith("-dirty") or not r["commit"]]
    probed = [r["forecast/actual"] for r in dag if r["forecast/actual"] is not None and r["probed"]]
    guessed = [r["forecast/actual"] for r in dag if r["forecast/actual"] is not None and not r["probed"]]
    return [
        f"DAG GPU jobs: {len(dag)}, asked/NVML {_span(ratio)}, below 1: {sum(x < 1 for x in ratio)}",
        f"setup jobs (sizing builds, probes): {len(body) - len(dag)}, asked below NVML: "
        f"{sum(1 for r in body if r['rule'] in SETUP_RULES and r['asked/NVML'] is not None and r['asked/NVML'] < 1)}",
        f"records from a dirty tree: {len(dirty)} of {len(body)}",
        f"forecast/actual, forecast from a probe: {_span(probed)} ({len(probed)} jobs); "
        f"from an estimate: {_span(guessed)} ({len(guessed)} jobs)",
        f"forecast from a probe within 20% of actual: {sum(abs(x - 1) <= 0.20 for x in probed)} of {len(probed)} jobs",
    ]


def cli(make, name: str, doc: str, argv=None) -> int:
    """RUN_DIR [--write]: print `make(RUN_DIR)`; --write also puts it beside the records as `name`."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    text = make(args.run_dir)
    if args.write:
        (args.run_dir / name).write_text(text)
    print(text)
    return 0


def main(argv=None) -> int:
    return cli(table, "table.md", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
