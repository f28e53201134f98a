"""What batching bought on a GPU, and what the determinism settings cost the LoRA step: the summary of a
`bench/gpu_run.sh batching` record folder, made from the raw records beside it.

    .venv/bin/python bench/batching_table.py bench/results/batching-h100-2026-12-07 [--write]

Reads: determinism/{on,off}.json (bench/determinism_cost.py), flops/flops.json (bench/forward_flops.py),
probes/*.json (bench/sizing_gpu.py), the one-a-call (w3) and auto (w4) working directories' records (and w5's, the
LoRA at 4 samples a forward, where it ran), compare-batch.txt (w3 against w4) and, when a second lease ran the
one-a-call side, compare-leases.txt (its w3 against this one's). --write puts the result in summary.md
(tests/test_determinism.py regenerates it).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _steady_steps(csv: Path) -> list[float]:
    rows = csv.read_text().splitlines()[1:]
    return [float(r.split(",")[3]) for r in rows][1:]  # the first step is the warm-up


def _verdicts(path: Path) -> tuple[dict[str, tuple[str, str]], str]:
    """artifact -> (verdict, figures) from a `fourloops compare` table, and its count line."""
    rows, count = {}, ""
    for line in path.read_text().splitlines():
        m = re.match(r"(results/\S+)\s+(\S+)\s+(equal|close|different|missing)\s+(.*?)\s{2,}", line + "  ")
        if m:
            rows[m.group(1)] = (m.group(3), m.group(4).strip())
        elif re.match(r"\d+ equal, \d+ close", line):
            count = line.strip()
    return rows, count


def determinism(record: Path) -> list[str]:
    from determinism_cost import against_none

    rows = [r for m in ("on", "off") for r in _json(record / "determinism" / f"{m}.json")["rows"]]
    out = ["| settings | samples a forward | step s (median of 3) | against none | GPU busy s | attention backward s |",
           "|---|---|---|---|---|---|"]
    for what, ratio, r in against_none(rows):
        attn = sum(k["seconds"] for k in r["kernels"]["top"] if "AttentionBackward" in k["kernel"]
                   or "sdpa" in k["kernel"] and "bprop" in k["kernel"])
        out.append(f"| {what} | {r['micro_batch']} | {r['median_step_seconds']:.3f} | {ratio:.3f} | "
                   f"{r['kernels']['device_seconds']:.3f} | {attn:.3f} |")
    return out


def probes(record: Path) -> list[str]:
    out = ["| probe | configuration | s an item, one a call | s an item, batched | speed-up |", "|---|---|---|---|---|"]
    for path in sorted((record / "probes").glob("*.json")):
        rec = _json(path)
        if "configurations" not in rec:
            continue
        confs = rec["configurations"]
        groups: dict = {}
        for c in confs:
            label = f"{c['references']} reference(s)" if "references" in c else f"{c.get('resolution')} px"
            groups.setdefault(label, {})[int(c.get("batch", 1))] = float(c["seconds_per_item"])
        for label, by in groups.items():
            one, most = by.get(1), max(by)
            if one is None or most == 1:
                continue
            out.append(f"| {rec['component']} | {label}, {most} a call | {one:.3f} | {by[most]:.3f} | "
                       f"{one / by[most]:.2f}x |")
    return out


def conditions(record: Path) -> list[str]:
    """The conditions whose views ran both ways: one a call (w3) and at auto (w4)."""
    both = [set(p.parent.name for p in (record / w / "results/generate").glob("*/views.json")) for w in ("w3", "w4")]
    return sorted(both[0] & both[1])


def jobs(record: Path) -> dict:
    def views(w, c):
        d = _json(record / w / f"results/generate/{c}/views.json")
        return statistics.mean(v["seconds"] for v in d["views"].values()), len(d["views"])

    def wall(w, rule):
        return _json(record / w / f"results/provenance/{rule}.json")["wall_seconds"]

    out = {"generate": {}}
    for c in conditions(record):
        (b1, n), (bn, _) = views("w3", c), views("w4", c)
        out["generate"][c] = {"views": n, "one": b1, "auto": bn, "wall_one": wall("w3", f"generate/{c}"),
                              "wall_auto": wall("w4", f"generate/{c}")}
    s1, sn = (statistics.mean(_steady_steps(record / w / "results/lora/camera.loss.csv")) for w in ("w3", "w4"))
    micro = _json(record / "w4/results/provenance/lora_train/camera.json")
    out["lora"] = {"one": s1, "auto": sn, "wall_one": wall("w3", "lora_train/camera"),
                   "wall_auto": wall("w4", "lora_train/camera"),
                   "micro_batch": micro.get("micro_batch") or (micro.get("outputs_meta") or {}).get("micro_batch")}
    return out


def walls(record: Path) -> list[str]:
    """Each GPU job's VRAM ask (its vram_mb resource) against the driver's peak of its process (NVML)."""
    out = ["| directory | job | batch | asked GiB | torch peak GiB | NVML peak GiB | asked/NVML |", "|---|---|---|---|---|---|---|"]
    for w in ("w3", "w4", "w5", "lease2/w3"):
        made = sorted(f"generate/{g.stem}" for g in (record / w / "results/provenance/generate").glob("*.json"))
        for rule in ("lora_embeddings/embeddings", "lora_train/camera", *made):
            path = record / w / "results" / "provenance" / f"{rule}.json"
            if not path.is_file() or (w in ("w4", "w5") and rule.startswith("lora_embeddings")):  # w3's, copied
                continue
            rec = _json(path)
            asked = float(rec["resources"]["vram_mb"]) / 1024
            batch = {"w4": "auto", "w5": f"{rec.get('micro_batch')} a forward"}.get(w, "one a call")
            out.append(f"| {w} | {rule.split('/')[0]} | {batch} | {asked:.2f} | {rec['peak_vram_gib']:.2f} | "
                       f"{rec['nvml_peak_gib']:.2f} | {asked / rec['nvml_peak_gib']:.3f} |")
    return out


def report(record: Path) -> str:
    runs = [ln for ln in (record / "gpu_run.log").read_text().splitlines() if "== code" in ln or "HBM3" in ln]
    j = jobs(record)
    lo = j["lora"]
    compared = (record / "compare-batch.txt").is_file()
    batch, batch_count = _verdicts(record / "compare-batch.txt") if compared else ({}, "not run")
    out = [f"# Batching and the determinism settings' cost in {record.name}", "",
           f"Made by `.venv/bin/python bench/batching_table.py bench/results/{record.name} --write` from the records "
           "beside it (`GPU_RUN_MODE=batching bench/gpu_run.sh start`). Machine and code, as the run logged them:", ""]
    out += [f"- `{ln.split('== ')[-1].strip()}`" for ln in dict.fromkeys(runs)]
    if (record / "determinism").is_dir():
        out += ["", "## What the determinism settings cost a LoRA step (8 samples, forward and backward, no optimizer)",
                "", *determinism(record)]
    if (record / "flops" / "flops.json").is_file():
        from forward_flops import table as flops_table

        out += ["", "## The transformer's forwards: FLOPs over seconds (bench/forward_flops.py)", "",
                flops_table(_json(record / "flops" / "flops.json")).rstrip("\n")]
    if (record / "probes").is_dir():
        out += ["", "## Probes of the batched path (bench/sizing_gpu.py; this commit's probe process did not apply the "
                "determinism settings, so these time torch's default kernels)", "", *probes(record)]
    out += ["", "## The jobs, each alone on the card, determinism settings on (sizing set, 512 px, 28 steps)", "",
            "| job | one a call | auto | speed-up | job wall, one a call | job wall, auto |",
            "|---|---|---|---|---|---|"]
    out += [f"| generate {c}, s a view ({g['views']} views) | {g['one']:.3f} | {g['auto']:.3f} | "
            f"{g['one'] / g['auto']:.2f}x | {g['wall_one']:.1f} s | {g['wall_auto']:.1f} s |"
            for c, g in j["generate"].items()]
    out += [f"| lora_train, s an optimizer step of 8 samples (steps 2-10) | {lo['one']:.3f} | {lo['auto']:.3f} | "
            f"{lo['one'] / lo['auto']:.2f}x | {lo['wall_one']:.1f} s | {lo['wall_auto']:.1f} s |", "",
            "## The walls' asks against the driver (each asked before its job ran, from the facts of the run's commit; "
            "which configurations a fit had read: bench/results/gpu-runs.md)", "", *walls(record), "",
            f"## One a call (w3) against auto (w4), `fourloops compare`: {batch_count}"]
    if compared:
        out += ["", "| artifact | verdict | figures |", "|---|---|---|"]
    out += [f"| `{a}` | {v} | {_cell(f)} |" for a, (v, f) in sorted(batch.items())
            if v != "equal" and not a.startswith("results/provenance/")]
    leases = record / "compare-leases.txt"
    if leases.is_file():
        rows, count = _verdicts(leases)
        out += ["", f"## The one-a-call side on a second lease of the same machine kind (lease2/), `fourloops compare`: "
                f"{count}", "", "| artifact | verdict | figures |", "|---|---|---|"]
        out += [f"| `{a}` | {v} | {_cell(f)} |" for a, (v, f) in sorted(rows.items()) if v != "equal"]
        same = sorted(a for a, (v, _) in rows.items() if v == "equal" and not a.startswith(("results/render",
                                                                                            "results/provenance")))
        out += ["", "Equal: " + ", ".join(f"`{a}`" for a in same)]
    return "\n".join(out) + "\n"


def main() -> int:
    from repro_table import summary_cli

    return summary_cli(report, __doc__)


if __name__ == "__main__":
    sys.exit(main())
