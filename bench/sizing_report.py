"""The sizing probes against the wall check: per GPU rule and configuration, the estimate the wall check makes
(config/models.yaml through fourloops.asks, without measurements), the measured peak and their ratio; the
forecast seconds against the measured ones.

    python bench/sizing_report.py bench/results/raw-h200 [--out bench/results/sizing-h200-2026-12-02.md]

The estimate is compared without the CUDA context the ask adds (torch's max_memory_allocated does not hold it);
the NVML column is the process as the driver saw it (context and allocator cache included).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def _fmt(v, nd=2) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def estimate(facts: dict, rec: dict):
    """(GiB the wall check estimates, its source, forecast seconds per item by configuration, forecast load s)."""
    from fourloops import asks

    s = {**rec["apparatus"]["settings"], "device": "cuda"}  # the estimate a GPU job gets, wherever this ran
    comp = rec["component"]
    if comp == "generator":
        a = asks.generator_ask(facts, s, measured=None)
        secs = facts["models"][s["backend"]].get("seconds") or {}
        per = {int(k): float(v) for k, v in (secs.get("per_view_by_references") or {}).items()}
        forecast = lambda c: per.get(int(c["references"]), per.get(max(per), None) if per else None)  # noqa: E731
    elif comp == "lora_step":
        a = asks.lora_ask(facts, s, measured=None)
        secs = facts["models"][s["backend"]].get("seconds") or {}
        table = {int(k): float(v) for k, v in (secs.get("per_lora_step_by_resolution") or {}).items()}
        res = int(s["resolution"])
        ref = min(table, key=lambda r: abs(r - res)) if table else None
        # models.yaml's figure is a step of 8 micro-steps on the desk; the probe times one micro-step
        forecast = lambda c: None if ref is None else table[ref] * (res / ref) ** 2 / 8  # noqa: E731
        gib, _ = asks.estimate_vram_gib(facts, s["backend"], mode="lora_step", frozen_dtype=s["frozen_dtype"],
                                        resident=asks.lora_resident(s), resolution=res)
        return gib, a.vram.value, a.vram.source, forecast, secs.get("load")
    elif comp == "detector":
        a = asks.detector_ask(facts, s, measured=None)
        secs = facts["models"]["rfdetr_keypoint_preview"].get("seconds") or {}
        forecast = lambda c: secs.get("per_image")  # noqa: E731
    else:
        a = asks.scorer_ask(facts, s, measured=None)
        secs = facts["models"]["qwen3_vl_8b"].get("seconds") or {}
        # models.yaml's per_image is one view's score (SC + PQ): half a question each
        forecast = lambda c: None if secs.get("per_image") is None else float(secs["per_image"]) / 2  # noqa: E731
    name = {"generator": s.get("backend"), "detector": "rfdetr_keypoint_preview"}.get(comp, "qwen3_vl_8b")
    precision = "fp32" if comp == "detector" else s["precision"]
    res = int(s.get("size") or s.get("resolution") or 512)
    model, _ = asks.estimate_vram_gib(facts, name, mode="inference", precision=precision, resolution=res)
    return model, a.vram.value, a.vram.source, forecast, secs.get("load")


def report(records: list[dict], facts: dict) -> tuple[str, str]:
    ok = [r for r in records if "configurations" in r]
    failed = [r for r in records if "configurations" not in r]
    gpu = next((r.get("gpu_name") for r in ok if r.get("gpu_name")), "unknown GPU")
    driver = next((r.get("driver") for r in ok if r.get("driver")), "?")
    date = next((r.get("started", "")[:10] for r in ok if r.get("started")), dt.date.today().isoformat())
    lines = [f"# Sizing probes on {gpu} ({date})", "",
             f"Random weights at the real shapes (model_set sizing, fourloops.sizing), loaded by the real loaders. "
             f"Driver {driver}. Peak = torch max_memory_allocated with the weights resident; model estimate = "
             "fourloops.asks.estimate_vram_gib from config/models.yaml's parameters and activations (no measured row); "
             "wall ask = what the wall check asks with no probe (a measured row where models.yaml has one, + allocator "
             "reserve + CUDA context); NVML = the process as the driver saw it. Forecast s = models.yaml seconds.", "",
             "| rule / configuration | precision | res | model estimate GiB | measured peak GiB | ratio | "
             "wall ask GiB | NVML GiB | ratio | forecast s/item | measured s/item | load forecast / measured s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    sources = []
    for r in sorted(ok, key=lambda r: (r["component"], r.get("bench_configuration", ""))):
        est, wall, src, forecast, load_fc = estimate(facts, r)
        sources.append(f"- {r.get('bench_configuration', r['key'])}: {src}")
        for c in r["configurations"]:
            label = ", ".join(f"{k} {c[k]}" for k in ("references", "question", "images_per_call", "text_encoder")
                              if k in c)
            peak = c["peak_vram_gib"]
            ratio = None if (peak is None or not est) else peak / est
            nvml = c["nvml_process_gib"]
            wall_ratio = None if (nvml is None or not wall) else nvml / wall
            fc = forecast(c)
            measured = c["seconds_per_item"]
            if c.get("error"):
                measured_txt = f"ERROR {c['error'][:80]}"
            else:
                measured_txt = _fmt(measured, 2)
            lines.append(f"| {r['component']} {r['key']} ({label}) | {r['precision']} | {r['resolution']} | {_fmt(est)} | "
                         f"{_fmt(peak)} | {_fmt(ratio, 3)} | {_fmt(wall)} | {_fmt(nvml)} | {_fmt(wall_ratio, 3)} | {_fmt(fc, 1)} | "
                         f"{measured_txt} | {_fmt(load_fc, 0)} / {_fmt(r['load_seconds'], 1)} |")
    if failed:
        lines += ["", "## Configurations that did not finish", ""]
        for r in failed:
            last = (r.get("error") or "").strip().splitlines()[-1:] or [""]
            lines.append(f"- {r.get('bench_configuration')}: rc {r.get('returncode')}: {last[0][:300]}")
    lines += ["", "## Where each estimate came from", "", *sources, "",
              "Scorer rows: one answer (prefill + decoding of max_new_tokens: random weights rarely stop); the "
              "forecast is half of models.yaml's per-score seconds (a score is the SC and the PQ question).", ""]
    slug = re.sub(r"[^a-z0-9]+", "-", str(gpu).lower()).strip("-").replace("nvidia-", "")
    return "\n".join(lines), f"sizing-{slug}-{date}.md"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", help="folder of bench/sizing_gpu.py records")
    ap.add_argument("--out", help="the markdown file (default bench/results/sizing-<gpu>-<date>.md)")
    args = ap.parse_args(argv)
    from fourloops.asks import load_facts

    facts = load_facts(REPO / "config" / "models.yaml")
    records = [json.loads(p.read_text()) for p in sorted(Path(args.records).glob("*.json")) if p.name != "builds.json"]
    if not records:
        print(f"no probe records in {args.records}", file=sys.stderr)
        return 2
    text, name = report(records, facts)
    out = Path(args.out) if args.out else REPO / "bench" / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
