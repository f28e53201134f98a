"""The reproducibility pair's account, from its committed records (bench/gpu_run.sh repro on a lent GPU):

  * the pair: the sizing DAG run twice in two fresh working directories; every output's sha256 in each
    (listing-1.txt, listing-2.txt); where the bytes differ, the two files themselves (w1/, w2/: the records and tables,
    images and tensors left out, their hashes being in the listings) compared by `fourloops compare`, which leaves the
    measurement fields of config/compare.yaml out;
  * the trace (bench/repro_trace.py): the first module whose output differed between two processes, settings off and on;
  * the cost: each GPU rule's job run alone with the settings off, then on (cost-off/, cost-on/), whole job and the
    parts the job times itself;
  * the batch: each generate or restyle job's VRAM ask at its batch against what the driver saw.

    .venv/bin/python bench/repro_table.py bench/results/repro-h100-2026-12-07 [--write]

--write puts the account in the record's summary.md (tests/test_repro.py regenerates it and compares).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def _listing(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        sha, rel = line.split(maxsplit=1)
        out[rel.strip()] = sha
    return out


# what the cost pass's jobs wrote that holds no time (their views, keypoints, LoRA, its curve and the embeddings)
RERUN_FILES = ("results/lora/camera.safetensors", "results/lora/camera.loss.png", "results/lora/embeddings.safetensors")


def pair(record: Path) -> dict:
    from fourloops import compare

    one, two = _listing(record / "listing-1.txt"), _listing(record / "listing-2.txt")
    same = sorted(p for p in one if two.get(p) == one[p])
    differ = sorted(p for p in one if p in two and two[p] != one[p])
    missing = sorted(set(one) ^ set(two))
    tol = compare.load_tolerances()
    a, b = compare.open_tree(record / "w1"), compare.open_tree(record / "w2")
    # the cost pass re-ran five jobs in w1 afterwards, without the pair's FOURLOOPS_MACHINE: their records there are
    # that pass's, whose `machine` block names another profile; the rest of each record is compared
    rows = [compare.compare_artifact(p.removeprefix("results/"), a, b, tol, ignore=("machine",)) for p in differ]
    after = record / "listing-1-after-cost.txt"  # absent where the run skipped the cost pass (GPU_RUN_COST=0)
    third = _listing(after) if after.is_file() else {}
    made = [p for p in third if p in one and (p.startswith(("results/generate/A/az", "results/keypoints/A/"))
                                              or p in RERUN_FILES)]
    rerun = sorted(p for p in made if third[p] == one[p])
    changed = sorted(p for p in made if third[p] != one[p])
    return {"files": len(set(one) | set(two)), "bytes_equal": len(same), "bytes_differ": differ, "missing": missing,
            "rows": rows, "third_equal": rerun, "third_changed": changed}


def _targets(record: Path) -> str:
    """What the pair ran, from its timeline: the sizing DAG, or the targets GPU_RUN_TARGETS named."""
    for line in (record / "timeline.txt").read_text().splitlines():
        words = line.split()
        if len(words) > 2 and words[1] == "pair:" and words[2].startswith("results/"):
            named = words[2:words.index("in")] if "in" in words else words[2:]
            return "the jobs behind " + ", ".join(f"`{t}`" for t in named)
    return "the sizing DAG"


def trace(record: Path) -> dict:
    out = {}
    for mode in ("off", "on"):
        path = record / "trace" / f"compare-{mode}.json"
        if path.exists():
            out[mode] = json.loads(path.read_text())
    return out


def _parts(rec: dict) -> float | None:
    """The seconds a job times itself past its load: its views, images, prompts or training."""
    t = rec.get("timing") or {}
    for key in ("view_seconds", "image_seconds", "prompt_seconds"):
        if key in t:
            return sum(t[key])
    return rec.get("train_seconds")


def costs(record: Path) -> list[dict]:
    """Each job of the cost pass: its wall seconds and its own parts' with the settings off and on, the median over
    the pass's rounds (cost-off/ and cost-on/, then cost-off-2/ and cost-on-2/, ...)."""
    rounds = [("cost-off", "cost-on")]
    while (record / f"cost-on-{len(rounds) + 1}").is_dir():
        rounds.append((f"cost-off-{len(rounds) + 1}", f"cost-on-{len(rounds) + 1}"))
    rows = []
    for on in sorted((record / "cost-on").rglob("*.json")):
        rel = on.relative_to(record / "cost-on")
        pairs = [(json.loads((record / a / rel).read_text()), json.loads((record / b / rel).read_text()))
                 for a, b in rounds if (record / a / rel).is_file() and (record / b / rel).is_file()]
        rows.append({"job": str(rel.with_suffix("")), "rounds": len(pairs),
                     "modes": (pairs[0][0]["determinism"]["mode"], pairs[0][1]["determinism"]["mode"]),
                     "off": _median(a["wall_seconds"] for a, _ in pairs),
                     "on": _median(b["wall_seconds"] for _, b in pairs),
                     "off_parts": _median(_parts(a) for a, _ in pairs), "on_parts": _median(_parts(b) for _, b in pairs)})
    return rows


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def batches(record: Path) -> list[dict]:
    rows = []
    for w in ("w1", "w2"):
        for path in sorted((record / w / "results" / "provenance").glob("*/*.json")):
            rec = json.loads(path.read_text())
            batch = (rec.get("timing") or {}).get("batch")
            if rec.get("rule") not in ("generate", "restyle") or not batch or not rec.get("nvml_peak_gib"):
                continue
            asked = rec["resources"]["vram_mb"] / 1024
            rows.append({"job": f"{w} {rec['rule']} {path.stem}", "batch": batch, "asked": asked,
                         "nvml": rec["nvml_peak_gib"], "torch": rec["peak_vram_gib"]})
    return rows


def _settings_cost(record: Path) -> list[str]:
    """The run's op-level costs, where it timed them (GPU_RUN_VIEWS_COST, GPU_RUN_LORA_ATTENTION): the tables
    `bench/determinism_cost.py --table` prints from determinism/views.json and determinism/attention.json."""
    import determinism_cost

    out = []
    views, lora = record / "determinism" / "views.json", record / "determinism" / "attention.json"
    if views.is_file():
        out += ["", "## What the settings cost a view: the jobs' settings and kernels (default), then all off (none), "
                "one process", "", determinism_cost.table([str(views)])]
        rows = json.loads(views.read_text())["generate"]
        images = {v: [(r["batch"], r["call"], tuple(r["sha256"])) for r in rows if r["attention"] == v]
                  for v in ("default", "none")}
        out += ["", "- the same images with the settings on as off, call by call: "
                    f"{images['default'] == images['none']}"]
        for batch in sorted({r["batch"] for r in rows}):
            timed = {v: statistics.median(r["seconds_a_view"] for r in rows
                                          if r["attention"] == v and r["batch"] == batch and r["call"] > 0)
                     for v in ("default", "none")}
            out.append(f"- {batch} a call: the settings cost a view {timed['default'] / timed['none'] - 1:+.1%}")
    if lora.is_file():
        rows = json.loads(lora.read_text())["rows"]
        off = [r for r in rows if not r["deterministic_algorithms"]]
        out += ["", "## What the settings cost a LoRA step (8 samples a forward, prompts padded), one process", "",
                "The first row is the process's settings with torch's deterministic algorithms off (the baseline: "
                "\"against all off\" needs a process with the settings off).", "", determinism_cost.table([str(lora)]),
                ""]
        out += [f"- {r.get('attention', 'default')}, deterministic algorithms on: "
                f"{r['median_step_seconds'] / off[0]['median_step_seconds'] - 1:+.1%} against the baseline, "
                f"{len(r['grad_sha256'])} gradient digest(s) over its steps"
                for r in rows if r["deterministic_algorithms"] and off]
    return out


def report(record: Path) -> str:
    p, t, c, b = pair(record), trace(record), costs(record), batches(record)
    first = json.loads((record / "w1" / "results" / "provenance" / "generate" / "A.json").read_text())
    d = first["determinism"]
    lines = [f"# The reproducibility pair in {record.name}", "",
             f"Made by `.venv/bin/python bench/repro_table.py bench/results/{record.name} --write` from the records "
             f"beside it. Machine: {d['versions']['gpu']} (compute capability {d['versions']['capability']}), "
             f"driver {first['gpu']['driver']}, torch {d['versions']['torch']}, CUDA {d['versions']['cuda']}, cuDNN "
             f"{d['versions']['cudnn']}; code {first['code']['commit'][:12]}, dirty {first['code']['dirty']}.", "",
             f"## The pair: {_targets(record)} twice, two fresh working directories, two snakemake runs", "",
             f"- outputs: {p['files']}; the same bytes: {p['bytes_equal']}; different bytes: {len(p['bytes_differ'])}; "
             f"in one run only: {len(p['missing'])}", ""]
    verdicts: dict[str, int] = {}
    for row in p["rows"]:
        verdicts[row.verdict] = verdicts.get(row.verdict, 0) + 1
    lines += [f"- of the {len(p['rows'])} whose bytes differ, by `fourloops compare` (measurement fields out): "
              + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())), "",
              "| artifact | verdict | what differs |", "|---|---|---|"]
    lines += [f"| `{row.artifact}` | {row.verdict} | {row.figures} |" for row in p["rows"]]
    if p["third_equal"] or p["third_changed"]:
        lines += ["", f"Five of the GPU jobs once more (the cost pass's with the settings on, alone on the card, in w1): "
                  f"{len(p['third_equal'])} of their views, keypoints, tensors and the loss curve the same bytes as the "
                  f"pair's, {len(p['third_changed'])} changed (listing-1-after-cost.txt)."]
    if t:
        lines += ["", "## The trace: the first module whose output differed between two processes", "",
                  "| settings | view image equal | generate | LoRA forward | LoRA gradients |", "|---|---|---|---|---|"]
    for mode, r in t.items():
        def first_of(part):
            fd = r[part]["first_difference"]
            return "all equal" if fd is None else f"first: `{fd['a'][0]}` ({r[part]['modules_differing']} modules)"
        lines.append(f"| {mode} | {r['image_equal']} | {first_of('generate')} | {first_of('lora_forward')} | "
                     f"{first_of('lora_grads')} |")
    for mode, r in t.items():
        steps = r["seconds"]["lora_steps"]
        lines.append(f"- {mode}: view seconds {', '.join(f'{x:.2f}' for x in r['seconds']['view'])}; LoRA step "
                     f"seconds {'; '.join(', '.join(f'{x:.2f}' for x in s) for s in steps)}")
    if c:
        n = max(r["rounds"] for r in c)
        lines += ["", "## What the settings cost: each GPU rule's job alone, off then on " + (
                  "(one run each)" if n == 1 else f"({n} rounds, interleaved; medians)"), "",
                  "| job | off s | on s | on/off | its own parts off s | on s | on/off |", "|---|---|---|---|---|---|---|"]
    for r in c:
        parts = (f"{r['off_parts']:.2f} | {r['on_parts']:.2f} | {r['on_parts'] / r['off_parts']:.3f}"
                 if r["off_parts"] and r["on_parts"] else "- | - | -")
        lines.append(f"| {r['job']} | {r['off']:.1f} | {r['on']:.1f} | {r['on'] / r['off']:.3f} | {parts} |")
    lines += _settings_cost(record)
    lines += ["", "## The batch term: each batched generator job's VRAM ask against the driver's peak", "",
              "| job | batch | asked GiB | NVML GiB | torch GiB | asked/NVML |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['job']} | {r['batch']} | {r['asked']:.3f} | {r['nvml']:.3f} | {r['torch']:.3f} | "
              f"{r['asked'] / r['nvml']:.3f} |" for r in b]
    return "\n".join(lines) + "\n"


def summary_cli(make, doc: str) -> int:
    """A record folder's summary script: `make(record)` printed, and with --write put in RECORD/summary.md."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("record", type=Path)
    ap.add_argument("--write", action="store_true", help="write RECORD/summary.md")
    args = ap.parse_args()
    text = make(args.record)
    if args.write:
        (args.record / "summary.md").write_text(text)
    print(text, end="")
    return 0


def main() -> int:
    return summary_cli(report, __doc__)


if __name__ == "__main__":
    sys.exit(main())
