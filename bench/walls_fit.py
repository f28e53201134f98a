"""What the driver sees of a GPU process over torch's allocated peak, per kind of process: the model fitted on the
records before each GPU run judged on that run's probes of configurations no fit saw (held out), and the model
config/models.yaml holds now, fitted on every committed GPU record (in-sample).

    .venv/bin/python bench/walls_fit.py                   # prints the table and the fitted facts
    .venv/bin/python bench/walls_fit.py --write           # writes bench/results/walls-fit-h200-2026-12-01.md
    .venv/bin/python bench/walls_fit.py --rows            # docs/walls-history.md's held-out table rows
    (tests/test_asks.py regenerates the table from the committed records and compares it with the committed file)

The model, per kind of process (fourloops.asks.process_kind: inference, nf4, detector, scorer, training; build):
  NVML = allocated x (1 + allocator_reserve) + (allocated - weights) x activations_reserve + cuda_context_gib
where weights are the resident weights config/models.yaml gives for the configuration (fourloops.asks.weights_gib)
and allocated - weights is what the pass adds over them: the pool keeps the freed blocks of its activations, so one
reserve of the whole peak falls below the driver on a large pass.
Fitted per kind: cuda_context_gib = the largest NVML - reserved pool, rounded up; (allocator_reserve,
activations_reserve) = the smallest linear envelope (least total slack, scipy's linprog) over every record's
reserved - allocated (NVML - allocated - context where a record has no pool figure), each rounded up (a wall errs
high). The records: the probes (bench/sizing_gpu.py, one configuration a process) and every GPU job's provenance of
the whole-DAG runs (bench/gpu_run.sh).
Which records are in-sample, and which runs held out which probes, judged by which facts (each run's
models-before.yaml: config/models.yaml as committed before it), is data: bench/results/heldout.yaml (RUNS_FILE).
A bounded slack (fit_bounded) is judged the same way, fitted on the records before each run, beside the walls' form.
The scorer's activations per prompt token are fitted on its bf16 SC answer and held out on the other answers.
"""

from __future__ import annotations

import argparse
import copy
import functools
import glob
import json
import math
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from gpu_table import carried  # noqa: E402  the files a run carried from an earlier one (its carried.txt)

RESULTS = REPO / "bench" / "results"
TABLE = RESULTS / "walls-fit-h200-2026-12-01.md"
KINDS = ("inference", "nf4", "detector", "scorer", "training")
RUNS_FILE = RESULTS / "heldout.yaml"  # the runs' roles: in-sample records, held-out sets, the next set (its header)


def _runs_data() -> dict:
    import yaml

    return yaml.safe_load(RUNS_FILE.read_text())


_RUNS = _runs_data()
# The runs the table's prose names where it says after which run a part of the walls' form was chosen.
FORMS: dict[str, str] = _RUNS["forms"]
# Records of a configuration the product no longer runs, left out with the reason.
STALE = {(f"bench/results/{e['record']}", e["key"]): e["why"] for e in _RUNS["in_sample"]["left_out"]}
# Probe folders every fit reads (the form was chosen after seeing them), and the whole-DAG runs whose GPU jobs'
# provenance every fit reads.
FITTED_PROBES = tuple(RESULTS / f for f in _RUNS["in_sample"]["probes"])
DAG_RUNS = tuple(RESULTS / f for f in _RUNS["in_sample"]["dag_runs"])
# The sizing builds (rule sizing_model) of the same runs.
BUILD_RUNS = DAG_RUNS
_CHOSEN = "chosen and committed before that run"


def _heldout_run(e: dict) -> dict:
    """A held-out run's entry: its probe folders judged by its models-before.yaml (config/models.yaml at `commit`),
    `before` saying what those facts were fitted on, `chosen` when its configurations were chosen."""
    run = RESULTS / e["records"]
    return {"name": e["name"], "run": run, "commit": e["commit"], "models_before": run / "models-before.yaml",
            "before": e["before"], "folders": tuple(run / f for f in e.get("folders", ["heldout/records"])),
            "chosen": e.get("chosen", _CHOSEN), "set_apart": e.get("set_apart", False),
            "probes_alone": e.get("fitted_on_probes_alone", False)}


# Each run's held-out probes under the default allocator, chosen before it, judged by the facts it was asked with,
# with the code of today (the asks' code reaches those facts as it did: a newer fact acts only where facts hold it).
HELDOUT_RUNS = tuple(_heldout_run(e) for e in _RUNS["heldout"] if not e.get("next"))
# The set the next GPU run probes (bench/gpu_run.sh's held-out step): no records yet, so no judgement.
NEXT_HELDOUT = next((e for e in _RUNS["heldout"] if e.get("next")), None)


def _expandable_run(e: dict, **folders: str) -> dict:
    run = RESULTS / e["records"]
    return {"name": e["name"], "run": run, "models_before": run / "models-before.yaml",
            **{k: tuple(run / f for f in e.get(k, default)) for k, default in folders.items()},
            **({"step": e["step"]} if "step" in e else {})}


# Runs whose every process ran torch's caching allocator with expandable segments: their overheads are fitted (`fit`,
# the same form and rule as the default allocator's) on the run's own in-sample records alone, at configurations the
# activation tables hold, and judged on its held-out probes with the other facts of its models-before.yaml.
EXPANDABLE_RUNS = tuple(_expandable_run(e, insample=[], heldout=["heldout/records"])
                        for e in _RUNS["expandable"]["fitted"])
# Runs under expandable segments judged by the walls' own facts for them, committed before the run: its
# models-before.yaml's process_overhead_expandable (fourloops.asks.for_allocator), no fit on the run itself.
EXPANDABLE_JUDGED = tuple(_expandable_run(e, heldout=["heldout/records"]) for e in _RUNS["expandable"]["judged"])


def _up(x: float, places: int) -> float:
    return math.ceil(x * 10**places - 1e-9) / 10**places


@functools.lru_cache(maxsize=None)
def _parsed(path: str, mtime_ns: int, size: int) -> dict:
    return json.loads(Path(path).read_text())


def _record(path) -> dict:
    """A committed JSON record, parsed once a process (a rewritten file, by its mtime and size, is read again): the
    table reads every record once per run it judges. Callers only read it."""
    st = os.stat(path)
    return _parsed(str(path), st.st_mtime_ns, st.st_size)


def rows(set_apart: bool = True) -> list[dict]:
    """One row per GPU process of the committed records: its configuration, allocated and reserved peaks, NVML;
    `set_apart`: a detector probe's later calls sampled AFTER_CALL (as the facts of runs whose entry says `set_apart`
    were fitted), else in-sample (as the facts before them were)."""
    out = []
    for path in sorted(glob.glob(str(RESULTS / "sizing-h200-2026-12-01" / "*.json"))):
        rec = _record(path)
        if "configurations" not in rec or rec.get("peak_nvml_process_gib") is None:
            continue
        confs = rec["configurations"]
        reserved = max(c["peak_reserved_gib"] for c in confs if c.get("peak_reserved_gib") is not None)
        comp, key = rec["component"], rec["key"]
        out.append({"record": str(Path(path).relative_to(REPO)), "component": comp, "key": key,
                    "precision": rec["precision"], "config": _config(comp, key, rec),
                    "allocated": rec["peak_vram_gib"], "reserved": reserved, "nvml": rec["peak_nvml_process_gib"]})
    for line in (RESULTS / "lora_gpu-h200-2026-12-01.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("what") != "lora_step":
            continue
        out.append({"record": "bench/results/lora_gpu-h200-2026-12-01.jsonl", "component": "lora_step",
                    "key": rec["key"], "precision": rec["frozen_dtype"],
                    "config": {"frozen_dtype": rec["frozen_dtype"], "text_encoder": rec["text_encoder"],
                               "resolution": rec["resolution"]},
                    "allocated": rec["peak_gib"], "reserved": rec["peak_reserved_gib"], "nvml": rec["nvml_process_gib"]})
    for line in (RESULTS / "omnigen2_gpu-h200-2026-12-01.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("what") != "generate":
            continue
        by = rec["by_references"]
        out.append({"record": "bench/results/omnigen2_gpu-h200-2026-12-01.jsonl", "component": "generator",
                    "key": f"generator/omnigen2/{rec['precision']}/{rec['size']}", "precision": rec["precision"],
                    "config": {"references": max(int(k) for k in by), "size": rec["size"]},
                    "allocated": max(v["peak_gib"] for v in by.values()), "reserved": None,
                    "nvml": max(v["nvml_process_gib"] for v in by.values())})
    out = [r for r in out if (r["record"], r["key"]) not in STALE]
    for r in out:
        r["kind"] = kind_of(r["component"], r["precision"])
        r["sample"] = "in-sample"
    detectors = {r["key"] for r in out if r["component"] == "detector"}
    held = tuple(f for run in HELDOUT_RUNS for f in run["folders"])
    return out + probe_rows(FITTED_PROBES + held, fitted_detectors=detectors, set_apart=set_apart) + dag_rows()


_RUN_FOLDER = re.compile(r"gpu-run-h[12]00-\d{4}-\d\d-\d\d(?:-(?:run(\d+)|(cap24)))?(?:-repeat)?(?:/|:|$)")


def run_ordinal(record: str) -> int | None:
    """The number of the GPU run that made a record, from its folder under bench/results (the bare 2026-12-02
    run's number is 1, the -cap24 run's 2, a -runN run's N, a run's -repeat pass its run's); None for a record of no
    such run (the component benches)."""
    m = _RUN_FOLDER.search(record)
    if m is None:
        return None
    return int(m[1]) if m[1] else 2 if m[2] else 1


def rows_before(run: dict) -> list[dict]:
    """The records the facts `run` was asked with (its models_before) were fitted on: those of the runs before it
    (a run's repeat pass came after it; a later run's DAG jobs too); where its entry says `fitted_on_probes_alone`,
    only their probes (not the DAG jobs' provenance)."""
    n = run_ordinal(str(run["run"].relative_to(REPO)))
    out = [r for r in rows(set_apart=run["set_apart"]) if (run_ordinal(r["record"]) or 0) < n]
    if run["probes_alone"]:
        dag = {r["record"] for r in dag_rows()}
        out = [r for r in out if r["record"] not in dag]
    return out


# A GPU job's provenance in the whole-DAG runs: (rule -> component) and what its params say of its configuration.
def _dag_config(rec: dict) -> tuple[str, str, str, dict] | None:
    """(component, key, precision, configuration) of a DAG job's provenance record, by the model key its stage says
    it measures (fourloops.stage.measured_key); None for a job on no card."""
    from fourloops.stage import measured_key

    params = rec.get("params") or {}
    job = params.get("job") or {}
    key = measured_key(rec["rule"], rec)
    if key is None:
        return None
    component, _, precision, *rest = key.split("/")
    if component == "text_encoder":  # the LoRA's instruction embeddings: the generator's text encoder alone
        return component, key, precision, {"backend": job["backend"]}
    if component == "generator":
        return component, key, precision, {"references": len(job.get("reference_azimuths") or [0]),
                                           "size": int(rest[0])}
    if component == "detector":
        return component, key, precision, {"resolution": int(rest[0]), "images_per_call": 1}
    if component == "scorer":
        return component, key, precision, {"question": "SC+PQ", "images": 2}
    t = params["train"]
    return component, key, precision, {"frozen_dtype": t["frozen_dtype"], "text_encoder": t["text_encoder"],
                                       "resolution": t["resolution"], "rank": t["rank"]}


def dag_rows(runs=None, allocator: str = "default") -> list[dict]:
    """Every GPU job of the whole-DAG runs (DAG_RUNS, or `runs`) made under `allocator`."""
    out = []
    for run in DAG_RUNS if runs is None else runs:
        skip = carried(run)
        for path in sorted((run / "sizing" / "results" / "provenance").rglob("*.json")):
            if path.relative_to(run).as_posix() in skip:
                continue
            rec = _record(path)
            if rec.get("nvml_peak_gib") is None or rec.get("peak_vram_gib") is None:
                continue
            found = _dag_config(rec)
            if found is None or allocator_of(rec) != allocator:
                continue
            comp, key, precision, config = found
            out.append({"record": str(path.relative_to(REPO)), "component": comp, "key": key, "precision": precision,
                        "config": config, "allocated": rec["peak_vram_gib"], "reserved": rec.get("peak_reserved_gib"),
                        "nvml": rec["nvml_peak_gib"], "kind": kind_of(comp, precision), "sample": "in-sample",
                        "rss": _gib(rec.get("peak_rss_mib")), "rss_anon": None})
    return out


def allocator_of(rec: dict) -> str:
    """"expandable" for a record made with torch's expandable segments (provenance `cuda_allocator`), else
    "default": a record that says nothing of its allocator ran torch's default caching allocator."""
    from fourloops.asks import record_allocator

    return "expandable" if record_allocator(rec) == "expandable_segments" else "default"


def _label(record: str) -> str:
    """A record's path under bench/results, its provenance folders shortened ("run:rule/job.json")."""
    return record.split("bench/results/", 1)[-1].replace("/sizing/results/provenance/", ":")


def _gib(mib) -> float | None:
    return None if mib is None else float(mib) / 1024


def _config(comp: str, key: str, rec: dict) -> dict:
    if comp == "lora_step":
        _, _, frozen, resident, res = key.split("/")
        return {"frozen_dtype": frozen, "text_encoder": "resident" if "text_encoder" in resident else "precomputed",
                "resolution": int(res)}
    if comp == "generator":
        return {"references": max(c["references"] for c in rec["configurations"]), "size": rec["resolution"]}
    return {"resolution": rec.get("resolution")}


def kind_of(component: str, precision: str) -> str:
    from fourloops.asks import process_kind

    return process_kind(component, precision)


def weights_of(row: dict, facts: dict | None = None) -> float:
    """The resident weights models.yaml gives for the record's configuration (what the wall's ask takes them as)."""
    from fourloops import asks

    facts = facts or _facts()
    c = row["config"]
    if row["component"] == "text_encoder":
        return asks.weights_gib(facts, c["backend"], row["precision"], ["text_encoder"])
    if row["component"] == "generator":
        return asks.weights_gib(facts, row["key"].split("/")[1], row["precision"])
    if row["component"] == "detector":
        return asks.weights_gib(facts, "rfdetr_keypoint_preview", "fp32")
    if row["component"] == "scorer":
        return asks.weights_gib(facts, "qwen3_vl_8b", row["precision"])
    te = asks.weights_gib(facts, "omnigen2", "bf16", ["text_encoder"]) if c["text_encoder"] == "resident" else 0.0
    return asks.weights_gib(facts, "omnigen2", c["frozen_dtype"], ["transformer"]) + te


@functools.lru_cache(maxsize=None)
def _facts(path: Path = REPO / "config" / "models.yaml") -> dict:
    """A models file's facts, read and checked once a process (every row's weights and ask read them)."""
    from fourloops import asks

    return asks.load_facts(path)


# A kind whose process holds another context from a resolution on: every LoRA step's record held 1.79 GiB outside
# torch's pool at 256 and 320 px and 0.92 at every resolution from 384 to 1024 (both allocators, bf16 and fp32 frozen,
# encoder resident or not; no record between 320 and 384, so the step is put at the first resolution measured low).
CONTEXT_STEPS = {"training": 384}


def _resolution(row: dict) -> int | None:
    return (row.get("config") or {}).get("resolution")


def fit(all_rows: list[dict], steps: dict[str, int] | None = None) -> dict:
    """Per kind, on the in-sample records: the context from those with a reserved pool, then the slack's smallest
    envelope, covering each record's reserved - allocated (or, with no pool figure, its NVML - allocated - context).
    `steps` (kind -> px): that kind's context fitted apart on its records below and from the resolution."""
    from scipy.optimize import linprog

    facts = {}
    for kind in KINDS:
        inn = [r for r in all_rows if r["kind"] == kind and r["sample"] == "in-sample"]
        if not inn:
            continue
        step = (steps or {}).get(kind)
        pooled = [r for r in inn if r["reserved"] is not None]
        low = [r for r in pooled if step is None or _resolution(r) < step]
        high = [r for r in pooled if step is not None and _resolution(r) >= step]
        ctx = _up(max(r["nvml"] - r["reserved"] for r in (low or high)), 2)
        over = {"cuda_context_gib": ctx}
        if high:
            over["context_step"] = {"from_px": step, "cuda_context_gib": _up(max(r["nvml"] - r["reserved"]
                                                                                 for r in high), 2)}
        peak = [r["allocated"] for r in inn]
        act = [max(0.0, r["allocated"] - r["weights"]) for r in inn]
        slack = [(r["reserved"] if r["reserved"] is not None else r["nvml"] - _context(r, over)) - r["allocated"]
                 for r in inn]
        lp = linprog([sum(peak), sum(act)], A_ub=[[-p, -a] for p, a in zip(peak, act)], b_ub=[-x for x in slack],
                     bounds=[(0, None), (0, None)])
        reserve, per_act = (float(x) for x in lp.x)
        facts[kind] = {
            "allocator_reserve": _up(reserve, 3),
            "activations_reserve": _up(per_act, 3),
            **over,
            "records": len(inn),
            "fitted_on": sorted({r["key"] for r in inn}),
        }
    return facts


def _step_text(f: dict) -> str:
    step = f.get("context_step")
    return f" ({step['cuda_context_gib']:.2f} from {step['from_px']} px)" if step else ""


def _context(row: dict, f: dict) -> float:
    """The CUDA context a kind's overheads `f` give the record's process (fourloops.asks.context_gib)."""
    from fourloops.asks import context_gib

    return context_gib(f, _resolution(row))


def fit_bounded(all_rows: list[dict], contexts: dict[str, float]) -> dict:
    """The form the walls do not use (FORMS["bounded_suggested_by"] names the run whose records suggested it):
    slack = allocated x allocator_reserve + min(activations x activations_reserve, slack_cap_gib), the pool's slack
    bounded however large the pass. Per kind, for each allocator reserve on a grid (0 to 0.15 by 0.0005), the least
    activations reserve and cap covering every record (rounded up), keeping the reserve with the least total slack;
    `contexts`: each kind's CUDA context."""
    out = {}
    for kind in KINDS:
        inn = [r for r in all_rows if r["kind"] == kind and r["sample"] == "in-sample"]
        pts = [((r["reserved"] if r["reserved"] is not None else r["nvml"] - contexts[kind]) - r["allocated"],
                r["allocated"], max(0.0, r["allocated"] - r["weights"])) for r in inn]
        best = None
        for i in range(301):
            reserve = _up(i * 0.0005, 4)
            need = [(s - a * reserve, act) for s, a, act in pts]
            per_act = _up(max([max(0.0, n) / act for n, act in need if act > 0] + [0.0]), 3)
            cap = _up(max([0.0] + [n for n, _ in need]), 2)
            total = sum(a * reserve + min(act * per_act, cap) for _, a, act in pts)
            if best is None or total < best[0] - 1e-12:
                best = (total, {"allocator_reserve": reserve, "activations_reserve": per_act, "slack_cap_gib": cap,
                                "cuda_context_gib": contexts[kind]})
        out[kind] = best[1]
    return out


def bounded_gib(row: dict, f: dict) -> float:
    act = max(0.0, row["allocated"] - row["weights"])
    return (row["allocated"] * (1 + f["allocator_reserve"]) + min(act * f["activations_reserve"], f["slack_cap_gib"])
            + f["cuda_context_gib"])


def bounded_lines() -> list[str]:
    """Each run's held-out probes judged by both forms, each fitted on the records before that run alone (the
    allocated peak measured, so only the overhead's form is judged)."""
    lines = []
    for run in HELDOUT_RUNS:
        before = rows_before(run)
        for r in before:
            r["weights"] = weights_of(r)
        linear = fit(before)
        bounded = fit_bounded(before, {k: f["cuda_context_gib"] for k, f in linear.items()})
        held = heldout_rows(run)
        for r in held:
            r["weights"] = weights_of(r)
        e_lin = [model_gib(r, linear[r["kind"]]) / r["nvml"] - 1 for r in held]
        e_bnd = [bounded_gib(r, bounded[r["kind"]]) / r["nvml"] - 1 for r in held]
        lines.append(f"- {run['name']} run, {len(held)} configurations: linear (the walls' form) {min(e_lin):+.1%} to "
                     f"{max(e_lin):+.1%}, below the driver {sum(e < 0 for e in e_lin)}; bounded {min(e_bnd):+.1%} to "
                     f"{max(e_bnd):+.1%}, below the driver {sum(e < 0 for e in e_bnd)}")
    return lines


def offset_lines() -> list[str]:
    """Each run's held-out OmniGen2 NF4 probes asked by the facts that run was asked with, without and with an NF4
    activations offset fitted (fit_precision_offset) on the records before that run alone: the offset's own held-out
    judgement."""

    runs = []
    for run in HELDOUT_RUNS:
        held = [r for r in heldout_rows(run) if r["component"] == "generator" and r["key"].split("/")[1] == "omnigen2"
                and r["precision"] == "nf4"]
        if not held:
            continue
        before = rows_before(run)
        for r in before:
            r["weights"] = weights_of(r)
        offset = fit_precision_offset(before)
        facts = _facts(run["models_before"])
        with_offset = copy.deepcopy(facts)  # the NF4 rows asked from bf16's table moved by the offset (the asks have
        table = with_offset["models"]["omnigen2"]["activations_gib"]["inference"]  # no such fact)
        for size in table:
            table[size] = max(0.0, table[size] + offset)
        runs.append((f"{run['name']} run, {len(held)} NF4 configurations, offset {offset:+.3f} GiB", held, facts,
                     with_offset))
    return _judged(runs, "offset", ranges=False)


def _judged(runs: list[tuple[str, list[dict], dict, dict]], form: str, ranges: bool) -> list[str]:
    """Each run's held-out rows (label, rows, the facts the run was asked with, the same with a form) asked without
    and with the form (ask/NVML - 1), then all of them: the form's own held-out judgement."""
    lines, errors = [], {"without": [], "with": []}
    for label, held, facts, changed in runs:
        without = [asked_gib(r, facts)[0] / r["nvml"] - 1 for r in held]
        within = [asked_gib(r, changed)[0] / r["nvml"] - 1 for r in held]
        lines.append(f"- {label}: without {min(without):+.1%} to {max(without):+.1%}, below the driver "
                     f"{sum(e < 0 for e in without)}, over +10% {sum(e > 0.10 for e in without)}; with "
                     f"{min(within):+.1%} to {max(within):+.1%}, below the driver {sum(e < 0 for e in within)}, "
                     f"over +10% {sum(e > 0.10 for e in within)}")
        errors["without"] += without
        errors["with"] += within
    lines.append("- all: " + "; ".join(
        f"{how} the {form}, {len(e)} configurations, " + (f"{min(e):+.1%} to {max(e):+.1%}, " if ranges else "")
        + f"below the driver {sum(x < 0 for x in e)}, over +10% {sum(x > 0.10 for x in e)}" for how, e in errors.items()))
    return lines


def per_reference_lines(least: int = 3) -> list[str]:
    """Each run's held-out OmniGen2 probes given their allocated peaks (model/NVML - 1, as bounded_lines) by the walls'
    form fitted on the records before that run, and by the same form fitted apart on the records of the probe's kind
    and reference count (OmniGen2's records with a pool figure, where at least `least` of them; else the kind's): does a
    reserve per reference count hold?"""
    def refs(r: dict):
        return r["config"].get("references")

    errors: dict[str, list[float]] = {"one reserve per kind": [], "a reserve per reference count": []}
    for run in HELDOUT_RUNS:
        before = rows_before(run)
        for r in before:
            r["weights"] = weights_of(r)
        linear = fit(before, CONTEXT_STEPS if "context_step" in _facts(run["models_before"])["process_overhead"]
                     ["training"] else None)
        for r in heldout_rows(run):
            if r["component"] != "generator" or r["key"].split("/")[1] != "omnigen2":
                continue
            r["weights"] = weights_of(r)
            f = linear[r["kind"]]
            same = [b for b in before if b["kind"] == r["kind"] and b["key"].split("/")[:2] == ["generator", "omnigen2"]
                    and refs(b) == refs(r) and b["reserved"] is not None]
            apart = {**fit(same)[r["kind"]], "cuda_context_gib": f["cuda_context_gib"]} if len(same) >= least else f
            errors["one reserve per kind"].append(model_gib(r, f) / r["nvml"] - 1)
            errors["a reserve per reference count"].append(model_gib(r, apart) / r["nvml"] - 1)
    return [f"- {how}: {len(e)} configurations, {min(e):+.1%} to {max(e):+.1%}, below the driver "
            f"{sum(x < 0 for x in e)}, over +10% {sum(x > 0.10 for x in e)}" for how, e in errors.items()]


# The sizing builds (rule sizing_model) make random weights on the card: their ask knows only the weights, so the
# whole of what the driver saw over them is one reserve of the weights (the build's transients included).


def build_rows() -> list[dict]:
    from fourloops import asks
    from fourloops.stage import builds

    facts, declared = _facts(), builds()
    out = []
    for run in BUILD_RUNS:
        for path in sorted((run / "sizing" / "results" / "provenance" / "sizing_model").glob("*.json")):
            rec = json.loads(path.read_text())
            if rec.get("peak_reserved_gib") is None or rec.get("nvml_peak_gib") is None:
                continue  # the detector's build never touches the card
            d = declared[rec["wildcards"]["component"]]
            out.append({"record": str(path.relative_to(REPO)), "component": rec["wildcards"]["component"],
                        "weights": asks.weights_gib(facts, d.model, d.dtype), "allocated": rec["peak_vram_gib"],
                        "reserved": rec["peak_reserved_gib"], "nvml": rec["nvml_peak_gib"]})
    return out


def fit_build(brows: list[dict]) -> dict:
    ctx = _up(max(r["nvml"] - r["reserved"] for r in brows), 2)
    return {"allocator_reserve": _up(max((r["nvml"] - ctx) / r["weights"] - 1 for r in brows), 3),
            "activations_reserve": 0.0, "cuda_context_gib": ctx}


def model_gib(row: dict, f: dict) -> float:
    return row["allocated"] * (1 + f["allocator_reserve"]) + _kept(row, f) + _context(row, f)


def _kept(row: dict, f: dict) -> float:
    """What overheads `f` give the record's pool of its pass over the weights: the activations reserve's share, a
    generator's by its reference count where `f` has one for it, or the kind's floor where more
    (fourloops.asks.activations_kept)."""
    from fourloops.asks import activations_kept

    refs = (row.get("config") or {}).get("references") if row.get("component") == "generator" else None
    return activations_kept({"process_overhead": {"kind": f}}, "kind", max(0.0, row["allocated"] - row["weights"]),
                            refs)[0]


# The generator kinds whose pool keeps less of a pass with fewer reference images (OmniGen2 NF4: 0.39-0.43 of the
# pass's activations at 1 reference, 0.59-0.87 at 3): their reserve by reference count (by_references).
GENERATOR_KINDS = ("inference", "nf4")


def _generator_points(recs: list[dict], f: dict) -> tuple[int, list[tuple[int, float, float]]]:
    """The most references the generator records hold, and each record's (references, activations GiB, pool slack
    over overheads `f`'s allocator reserve, as `fit` measures it: reserved - allocated x (1 + allocator_reserve))."""
    points = []
    for r in recs:
        if r["component"] == "generator" and r["config"].get("references") and r["allocated"] > r["weights"]:
            slack = (r["reserved"] if r["reserved"] is not None else r["nvml"] - _context(r, f)) - r["allocated"]
            points.append((r["config"]["references"], r["allocated"] - r["weights"],
                           slack - r["allocated"] * f["allocator_reserve"]))
    return max([refs for refs, _, _ in points] + [0]), points


def by_references(recs: list[dict], f: dict) -> dict[int, float]:
    """A generator kind's activations reserve per reference count below the most its records hold: the kind's
    reserve (the envelope, set by the most references) less one step per reference fewer, the largest step (rounded
    down; the reserves rounded up) that keeps every record of fewer references covered, as `fit` covers them:
    reserved - allocated x (1 + allocator_reserve) <= (allocated - weights) x the count's reserve. One step for
    every count, not an envelope per count: fitted apart, each count's envelope rests on a few records and a new
    configuration exceeds it (per_reference_lines). {} where no record has fewer references than the most."""
    most, points = _generator_points(recs, f)
    steps = [(f["activations_reserve"] - need / act) / (most - refs) for refs, act, need in points if refs < most]
    if not steps:
        return {}
    step = math.floor(max(0.0, min(steps)) * 1000 + 1e-9) / 1000
    return {n: _up(f["activations_reserve"] - step * (most - n), 3) for n in range(1, most)}


def by_references_floored(recs: list[dict], f: dict) -> tuple[dict[int, float], float]:
    """A generator kind's reserve per reference count and the pool's floor under it: one step per reference fewer
    (as by_references) and the least floor (`activations_floor_gib`, rounded up) covering every record the step's
    reserve leaves uncovered, the step (0.001 apart, 0 to the kind's reserve) whose asks hold the least slack over
    the records. The records show why: at 1 reference OmniGen2 NF4's pool kept 0.44 GiB of a 0.67 GiB pass at 512 px
    and 0.96 of 2.45 at 1024, a share that falls as the pass grows, which a step alone covers only by over-asking the
    large passes (NF4 512 px with 1 reference was asked 0.995 of the driver by the step alone). ({}, 0.0) where no
    record has fewer references than the most."""
    most, points = _generator_points(recs, f)
    if not any(refs < most for refs, _, _ in points):
        return {}, 0.0
    reserve = f["activations_reserve"]
    best = None
    for i in range(int(reserve * 1000) + 1):
        per = {n: _up(max(0.0, reserve - i / 1000 * (most - n)), 3) for n in range(1, most)}
        share = [(act * per.get(n, reserve), need) for n, act, need in points]
        floor = _up(max([0.0] + [need for kept, need in share if kept < need]), 2)
        total = sum(max(kept, floor) for kept, _ in share)
        if best is None or total < best[0] - 1e-12:
            best = (total, per, floor)
    return best[1], best[2]


def fit_with_references(all_rows: list[dict], steps: dict[str, int] | None = None) -> dict:
    """`fit`, and each generator kind's reserve by reference count and the pool's floor (by_references_floored) on
    its in-sample records."""
    facts = fit(all_rows, steps)
    for kind in GENERATOR_KINDS:
        if kind in facts:
            refs, floor = by_references_floored(
                [r for r in all_rows if r["kind"] == kind and r["sample"] == "in-sample"], facts[kind])
            if refs:
                facts[kind]["activations_reserve_by_references"] = refs
            if floor:
                facts[kind]["activations_floor_gib"] = floor
    return facts


def _generator_runs():
    """Each held-out run with generator probes: (run, its held-out generator rows, the in-sample records before it
    per generator kind, a copy of the facts it was asked with), every row's weights set by those facts."""

    for run in HELDOUT_RUNS:
        held = [r for r in heldout_rows(run) if r["component"] == "generator" and r["kind"] in GENERATOR_KINDS]
        if not held:
            continue
        before = rows_before(run)
        for r in before:
            r["weights"] = weights_of(r)
        facts = copy.deepcopy(_facts(run["models_before"]))
        for r in held:
            r["weights"] = weights_of(r, facts)
        inn = {kind: [r for r in before if r["kind"] == kind and r["sample"] == "in-sample"] for kind in GENERATOR_KINDS}
        yield run, held, inn, facts


def _overheads(over: dict) -> dict:
    return {k: over[k] for k in ("allocator_reserve", "activations_reserve", "cuda_context_gib")}


def _per_count_text(per: dict[int, float]) -> str:
    return ", ".join(f"{n}: {v:.3f}" for n, v in per.items()) or "none"


def references_lines() -> list[str]:
    """Each run's held-out generator probes asked by the facts that run was asked with, without and with a reserve
    by reference count fitted (by_references) on the records before that run alone, from those facts' reserves:
    the form's own held-out judgement (asks, not the model given the measured peak)."""

    runs = []
    for run, held, inn, facts in _generator_runs():
        for kind in GENERATOR_KINDS:  # without the form, where the run was asked with it
            facts["process_overhead"][kind].pop("activations_reserve_by_references", None)
        with_refs = copy.deepcopy(facts)
        taken = {}
        for kind in GENERATOR_KINDS:
            over = with_refs["process_overhead"][kind]
            taken[kind] = over["activations_reserve_by_references"] = by_references(inn[kind], _overheads(over))
        fitted_text = "; ".join(f"{k} {_per_count_text(t)}" for k, t in taken.items())
        runs.append((f"{run['name']} run, {len(held)} generator configurations ({fitted_text})", held, facts,
                     with_refs))
    return _judged(runs, "reserve by references", ranges=True)


def floor_lines() -> list[str]:
    """Each run's held-out generator probes asked by the facts that run was asked with, its generator kinds' reserve
    by reference count refitted on the records before that run alone: by the step alone (by_references) and by the
    step with the pool's floor (by_references_floored). The floor's own held-out judgement."""

    runs = []
    for run, held, inn, facts in _generator_runs():
        floored = copy.deepcopy(facts)
        taken = []
        for kind in GENERATOR_KINDS:
            over = facts["process_overhead"][kind]
            over.pop("activations_floor_gib", None)
            f = _overheads(over)
            over["activations_reserve_by_references"] = by_references(inn[kind], f)
            per, floor = by_references_floored(inn[kind], f)
            floored["process_overhead"][kind].update(activations_reserve_by_references=per, activations_floor_gib=floor)
            taken.append(f"{kind} {_per_count_text(per)}, floor {floor:.2f} GiB")
        runs.append((f"{run['name']} run, {len(held)} generator configurations ({'; '.join(taken)})", held, facts,
                     floored))
    return _judged(runs, "floor", ranges=True)


def scorer_rows() -> list[dict]:
    """The scorer's answers with the EditScore prompt (grades_gpu records): weights, prompt tokens, peak."""
    out = []
    for name in ("grades_gpu-bf16-alone-h200-2026-12-01.json", "grades_gpu-h200-2026-12-01.json"):
        rec = json.loads((RESULTS / name).read_text())
        for run in rec["runs"]:
            if name.startswith("grades_gpu-h200") and run["precision"] == "bf16":
                continue  # loaded after the nf4 model in the same process: its weights figure holds both
            for q in ("sc", "pq"):
                out.append({"record": f"bench/results/{name}", "precision": run["precision"], "question": q.upper(),
                            "weights": run["weights_gib"], "tokens": run[q]["prompt_tokens"],
                            "peak": run[q]["peak_vram_gib"]})
    for r in out:
        r["sample"] = "in-sample" if (r["precision"], r["question"]) == ("bf16", "SC") else "held out"
    return out


def fit_scorer(srows: list[dict]) -> float:
    inn = [r for r in srows if r["sample"] == "in-sample"]
    return _up(max((r["peak"] - r["weights"]) / r["tokens"] for r in inn) * 1e6, 0) / 1e6


# A detector probe's later configurations ran in the process of its first, whose pool kept that call's blocks: the
# larger call after them left 0.15-0.31 of its activations in the pool in 13 of 14 records (4 after 1: 0.12), where
# every first call of 4 or more images left 0.09-0.15. No job calls so: a keypoints job calls the detector on one
# image at a time (fourloops.stages.keypoints; tests/test_keypoints.py), and a batched call would repeat one size, its
# last smaller. Such rows are set apart from the detector's fit and from the held-out rows of runs whose entry says so
# (`set_apart`), and listed apart; the earlier runs' held-out judgements stand as they were made. A control held it:
# 30 images after 6 in one process kept 0.23 of its activations, 30 alone 0.06.
AFTER_CALL = "after another call in its process"


def probe_rows(folders, *, fitted_detectors: set[str] = frozenset(), sample: str = "in-sample",
               allocator: str = "default", set_apart: bool = False) -> list[dict]:
    """One row per configuration of the probe records in `folders` (a record's configurations each have their NVML)
    made under `allocator`; a detector configuration at one image a call whose key is in `fitted_detectors` is that
    record again. `set_apart`: a detector configuration after another in its process is sampled AFTER_CALL."""
    out = []
    for folder in folders:
        run = next((p for p in folder.parents if p.name.startswith("gpu-run-")), None)
        skip = carried(run) if run is not None else set()
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            if run is not None and path.relative_to(run).as_posix() in skip:
                continue
            rec = _record(path)
            if "configurations" not in rec or allocator_of(rec) != allocator:
                continue  # a probe that failed (its error is in the record), or one under another allocator
            comp, precision = rec["component"], rec["precision"]
            for i, c in enumerate(rec["configurations"]):
                if c.get("error") or c.get("nvml_process_gib") is None:
                    continue
                if comp == "text_encoder":  # the generator's text encoder alone (the lora_embeddings job's)
                    config = {"backend": rec["key"].split("/")[1]}
                elif comp == "generator":
                    config = {"references": c["references"], "size": c["resolution"]}
                elif comp == "detector":
                    if c["images_per_call"] == 1 and rec["key"] in fitted_detectors:
                        continue
                    config = {"resolution": c["resolution"], "images_per_call": c["images_per_call"]}
                elif comp == "lora_step":
                    config = {"frozen_dtype": c["frozen_dtype"], "text_encoder": c["text_encoder"],
                              "resolution": c["resolution"],
                              "rank": int(c["rank"]) if c.get("rank") else int(m.group(1))
                              if (m := re.search(r"-r(\d+)$", rec.get("bench_configuration") or "")) else 8}
                    # the probe records its rank since 2026-12-04; before, sizing_gpu.py named a rank other than
                    # the default (8) "-r<rank>"
                else:
                    config = {"question": c["question"], "images": c["images"],
                              "image_size": int(c.get("resolution") or 512)}
                after = comp == "detector" and i > 0  # a later call of its process (AFTER_CALL)
                out.append({"record": str(path.relative_to(REPO)), "component": comp, "key": rec["key"],
                            "precision": precision, "config": config, "allocated": c["peak_vram_gib"],
                            "reserved": c.get("peak_reserved_gib"), "nvml": c["nvml_process_gib"],
                            "kind": kind_of(comp, precision), "after_call": after,
                            "sample": AFTER_CALL if after and set_apart else sample,
                            "rss": _gib(rec.get("peak_rss_mib")),
                            "rss_anon": _gib((rec.get("rss_sampled") or {}).get("peak_rssanon_mib")),
                            **({"instruction": rec["instruction"]} if comp == "scorer" and "instruction" in rec else {})})
    return out


def _conf_id(r: dict) -> tuple:
    return r["key"], json.dumps({k: v for k, v in r["config"].items() if k != "image_size" or r["component"] != "scorer"
                                 or v != 512}, sort_keys=True)


def heldout_rows(run: dict | None = None) -> list[dict]:
    """A run's probes of configurations no fit before it used (the first held-out run's by default): a detector at
    one image a call, or a configuration measured by an earlier run (Qwen-Image-Edit NF4 at 512 px run again under the
    cap), would be a fitted one again."""
    run = run or HELDOUT_RUNS[0]
    got = probe_rows(run["folders"], fitted_detectors={"detector/rfdetr_keypoint_preview/fp32/576"}, sample="held out",
                     set_apart=run.get("set_apart", False))
    got = [r for r in got if r["sample"] == "held out"]
    if run["probes_alone"]:  # no configuration of it had been measured
        return got
    seen = {_conf_id(r) for r in rows_before(run)}
    return [r for r in got if _conf_id(r) not in seen]


def asked_gib(row: dict, facts: dict | None = None) -> tuple[float, str]:
    """The wall's VRAM ask for the record's configuration, as the workflow computes it from config/models.yaml
    (or `facts`) alone: no probe, no provenance."""
    a = asked(row, facts)
    return a.vram.value, a.vram.source


def asked(row: dict, facts: dict | None = None):
    """The wall's whole ask (fourloops.asks.Ask) for the record's configuration from models.yaml alone."""
    from fourloops import asks

    facts = facts or _facts()
    c = row["config"]
    if row["component"] == "text_encoder":
        return asks.text_encoder_ask(facts, {"backend": c["backend"], "text_encoder_dtype": row["precision"],
                                             "device": "cuda"})
    if row["component"] == "generator":
        gen = {"backend": row["key"].split("/")[1], "precision": row["precision"], "size": c["size"], "device": "cuda"}
        a = asks.generator_ask(facts, gen, n_references=c["references"])
    elif row["component"] == "detector":
        a = asks.detector_ask(facts, {"resolution": c["resolution"], "device": "cuda"},
                              batch=int(c.get("images_per_call", 1)))
    elif row["component"] == "scorer":
        a = asks.scorer_ask(facts, {"precision": row["precision"], "device": "cuda",
                                    "image_size": int(c.get("image_size", 512))}, n_views=int(c.get("images", 1)),
                            instruction=row.get("instruction"))  # a record that names none: the longest allowed
    else:
        job = {"backend": "omnigen2", "frozen_dtype": c["frozen_dtype"], "text_encoder": c["text_encoder"],
               "resolution": c["resolution"], "device": "cuda", "accumulation": 8, "steps": 1,
               **({"rank": c["rank"]} if c.get("rank") else {})}
        a = asks.lora_ask(facts, job)
    return a


def _row_line(r: dict, with_sample: bool) -> str:
    conf = ", ".join(f"{k} {v}" for k, v in r["config"].items())
    res = "-" if r["reserved"] is None else f"{r['reserved']:.3f}"
    sample = f" {r['sample']} |" if with_sample else ""
    return (f"| {r['kind']} | {_label(r['record'])} | {r['key']} ({conf}) |{sample} {r['allocated']:.3f} | "
            f"{r['weights']:.3f} | {res} | {r['nvml']:.3f} | {r['model']:.3f} | {r['model'] / r['nvml']:.3f} | "
            f"{r['ask']:.3f} | {r['ask'] / r['nvml']:.3f} |")


def _errors(label: str, rs: list[dict]) -> str:
    """One summary line of annotated rows: "<label>: N, wall ask/NVML - 1 from ... to ...; below ...; over ...;
    model/NVML - 1 from ... to ..." (tests compare the README's quotes with these)."""
    e_model = [r["model"] / r["nvml"] - 1 for r in rs]
    e_ask = [r["ask"] / r["nvml"] - 1 for r in rs]
    return (f"- {label}: {len(rs)}, wall ask/NVML - 1 from {min(e_ask):+.1%} to {max(e_ask):+.1%}; below the driver: "
            f"{sum(e < 0 for e in e_ask)}; over +10%: {sum(e > 0.10 for e in e_ask)}; model/NVML - 1 from "
            f"{min(e_model):+.1%} to {max(e_model):+.1%}")


def _annotate(all_rows: list[dict], over: dict, facts: dict | None = None) -> None:
    """Each row's weights, modelled NVML (`over`: the overheads per kind) and wall ask (`facts`: models.yaml)."""
    for r in all_rows:
        r["weights"] = weights_of(r, facts)
        r["model"] = model_gib(r, over[r["kind"]])
        r["ask"], _ = asked_gib(r, facts)


def expandable_rows(run: dict) -> tuple[list[dict], list[dict]]:
    """(in-sample, held-out) rows of a run under expandable segments; a held-out configuration that is one of the
    in-sample ones is left out."""
    inn = (probe_rows(run["insample"], allocator="expandable")
           + dag_rows((run["run"],), allocator="expandable"))
    held = probe_rows(run["heldout"], fitted_detectors={"detector/rfdetr_keypoint_preview/fp32/576"},
                      sample="held out", allocator="expandable")
    seen = {_conf_id(r) for r in inn}
    return inn, [r for r in held if _conf_id(r) not in seen]


def expandable_facts(run: dict) -> tuple[dict, dict, list[dict], list[dict]]:
    """(the overheads fitted on the run's in-sample records, the facts its held-out rows are asked with: its
    models-before.yaml with those overheads, in-sample rows, held-out rows), each row annotated."""
    inn, held = expandable_rows(run)
    before = _facts(run["models_before"])
    for r in inn:
        r["weights"] = weights_of(r, before)
    over = fit(inn)
    judged = {**before, "process_overhead": {**before["process_overhead"],
                                             **{k: {x: v[x] for x in ("allocator_reserve", "activations_reserve",
                                                                      "cuda_context_gib")} for k, v in over.items()}}}
    _annotate(inn, judged["process_overhead"], judged)
    _annotate(held, judged["process_overhead"], judged)
    return over, judged, inn, held


def fit_expandable() -> dict:
    """The overheads under expandable segments the walls use (config/models.yaml `process_overhead_expandable`): the
    same fit on every record of the expandable runs, held-out probes included once they were judged (in-sample
    from here)."""
    every = []
    for run in EXPANDABLE_RUNS:
        inn, held = expandable_rows(run)
        before = _facts(run["models_before"])
        for r in inn + held:
            r["weights"] = weights_of(r, before)
            r["sample"] = "in-sample"
        every += inn + held
    for run in EXPANDABLE_JUDGED:
        if run["models_before"].exists():
            held = judged_and_dag_rows(run, _facts(run["models_before"]))
            for r in held:
                r["sample"] = "in-sample"
            every += held
    return fit(every, CONTEXT_STEPS)


def judged_and_dag_rows(run: dict, facts: dict) -> list[dict]:
    """A judged run's held-out probes (judged_rows gives them their weights) and its DAG's jobs, if any, weighed by
    `facts`: what the expandable refit reads of it."""
    dag = dag_rows((run["run"],), allocator="expandable")
    for r in dag:
        r["weights"] = weights_of(r, facts)
    return judged_rows(run) + dag


def expandable_lines() -> list[str]:
    head = ("| kind | record | configuration | sample | allocated GiB | weights GiB | reserved GiB | NVML GiB | model GiB | "
            "model/NVML | ask GiB | ask/NVML |")
    out = []
    for run in EXPANDABLE_RUNS:
        out += ["", f"## Expandable segments: the {run['name']} run, fitted on its in-sample records, judged on its "
                "held-out probes", "",
                f"Every process of `{run['run'].relative_to(REPO).as_posix()}` ran torch's caching allocator with "
                "expandable segments (bench/gpu_run.sh GPU_RUN_ALLOC=expandable; each record's `cuda_allocator`). "
                "The overheads are fitted by the same rule as above on its in-sample records alone (DAG jobs and "
                "probes at configurations the activation tables hold); its held-out probes, chosen and committed "
                "before the run, are asked with them and the rest of "
                f"`{run['models_before'].relative_to(REPO).as_posix()}`.", ""]
        if not run["models_before"].exists():
            out.append("- no records yet")
            continue
        over, _, inn, held = expandable_facts(run)
        for kind, f in over.items():
            out.append(f"- fitted, {kind}: allocator_reserve {f['allocator_reserve']:.3f}, activations_reserve "
                       f"{f['activations_reserve']:.3f}, cuda_context_gib {f['cuda_context_gib']:.2f}; on "
                       f"{f['records']} records of {'; '.join(f['fitted_on'])}")
        out += ["", head, "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        out += [_row_line(r, True) for r in inn + held]
        for label, rs in (("in-sample", inn), ("held-out", held)):
            if not rs:
                out.append(f"- {label} configurations ({run['name']} run, expandable segments): none")
                continue
            out.append(_errors(f"{label} configurations ({run['name']} run, expandable segments)", rs))
    if any(run["models_before"].exists() for run in EXPANDABLE_RUNS):
        refit = fit_expandable()
        facts = _facts()
        every = []
        for run in EXPANDABLE_RUNS:
            every += [r for rs in expandable_rows(run) for r in rs]
        every += [r for run in EXPANDABLE_JUDGED if run["models_before"].exists()
                  for r in judged_and_dag_rows(run, facts)]
        from fourloops import asks

        exp = asks.for_allocator(facts, "expandable_segments")
        _annotate(every, exp["process_overhead"], exp)
        e_ask = [r["ask"] / r["nvml"] - 1 for r in every]
        out += ["", "Refit on every record of the expandable runs (this one's and the judged runs' below), held-out ones "
                "included once judged (config/models.yaml "
                "`process_overhead_expandable`, what the walls ask on a machine whose `cuda_allocator` is "
                "expandable_segments; in-sample, no run has judged it):"]
        out += [f"- refit, {kind}: allocator_reserve {f['allocator_reserve']:.3f}, activations_reserve "
                f"{f['activations_reserve']:.3f}, cuda_context_gib {f['cuda_context_gib']:.2f}{_step_text(f)}; on "
                f"{f['records']} records" for kind, f in refit.items()]
        out.append(f"- with them (in-sample): {len(every)} configurations, wall ask/NVML - 1 from {min(e_ask):+.1%} to "
                   f"{max(e_ask):+.1%}; below the driver: {sum(e < 0 for e in e_ask)}")
    return out


def judged_rows(run: dict) -> list[dict]:
    """A judged run's held-out probes, asked as a machine whose cuda_allocator is expandable_segments asks with the
    facts committed before the run; a configuration an expandable run before it measured is left out."""
    from fourloops import asks

    held = probe_rows(run["heldout"], fitted_detectors={"detector/rfdetr_keypoint_preview/fp32/576"},
                      sample="held out", allocator="expandable")
    seen = {_conf_id(r) for before in EXPANDABLE_RUNS for rs in expandable_rows(before) for r in rs}
    for before in EXPANDABLE_JUDGED[:EXPANDABLE_JUDGED.index(run)]:  # and every judged run's before it
        seen |= {_conf_id(r) for r in probe_rows(before["heldout"], allocator="expandable")}
    held = [r for r in held if _conf_id(r) not in seen]
    exp = asks.for_allocator(_facts(run["models_before"]), "expandable_segments")
    _annotate(held, exp["process_overhead"], exp)
    return held


def judged_lines() -> list[str]:
    out = []
    for run in EXPANDABLE_JUDGED:
        out += ["", f"## Expandable segments: the {run['name']} run's probes, judged by the walls' facts for them", "",
                "Configurations no expandable record had measured, chosen and committed before the run (bench/gpu_run.sh "
                f"`{run['step']}`), every process with expandable segments, asked as a machine whose `cuda_allocator` is "
                "expandable_segments asks: `process_overhead_expandable` and the rest of "
                f"`{run['models_before'].relative_to(REPO).as_posix()}` (config/models.yaml as committed before it).", ""]
        if not run["models_before"].exists():
            out.append("- no records yet")
            continue
        held = judged_rows(run)
        out += ["| kind | record | configuration | allocated GiB | weights GiB | reserved GiB | NVML GiB | model GiB | "
                "model/NVML | ask GiB | ask/NVML |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        out += [_row_line(r, False) for r in held]
        out += ["", _errors(f"held-out configurations ({run['name']} run, expandable segments, the walls' facts)", held)]
    return out


def _expandable_folders() -> tuple[Path, ...]:
    """Every folder of probe records made under expandable segments: each expandable run's and each judged run's."""
    return tuple(f for run in EXPANDABLE_RUNS for f in (*run["insample"], *run["heldout"])) + tuple(
        f for run in EXPANDABLE_JUDGED for f in run["heldout"])


def rank_lines(default_rows: list[dict] | None = None) -> list[str]:
    """The LoRA's rank term (`lora_gib_per_rank`, fitted on the default allocator's pairs of ranks: today the one pair
    its records hold, 8 and 32 at 512 px) against every resolution measured at two ranks, under either allocator. Where the two ranks
    ran under different allocators, the allocated peaks are first put on one footing (expandable segments) by the
    allocators' offset at the configurations both measured, which are not the pairs judged. `default_rows`: rows(),
    when the caller has read them already."""
    per_rank = _facts()["models"]["omnigen2"]["lora_gib_per_rank"]
    peak: dict[str, dict[tuple, float]] = {"default": {}, "expandable": {}}
    default_rows = rows() if default_rows is None else default_rows
    for allocator, rs in (("default", default_rows),
                          ("expandable", probe_rows(_expandable_folders(), allocator="expandable"))):
        for r in rs:
            if r["component"] == "lora_step":
                c = r["config"]
                k = (c["frozen_dtype"], c["text_encoder"], c["resolution"], int(c.get("rank", 8)))
                peak[allocator][k] = max(peak[allocator].get(k, 0.0), r["allocated"])
    both = sorted(set(peak["default"]) & set(peak["expandable"]))
    offsets = [peak["expandable"][k] - peak["default"][k] for k in both]
    lo_off, hi_off = min(offsets), max(offsets)
    out = ["", "## The LoRA's rank term at every resolution measured at two ranks", "",
           f"`lora_gib_per_rank` ({per_rank:g} GiB a rank; config/models.yaml) was fitted on the default allocator's "
           "pairs of ranks (in-sample; fit_rank); no other pair below was used to fit it (held out). "
           "Allocated peaks under the two allocators differ at one configuration: expandable segments minus the "
           f"default allocator {lo_off:+.3f} to {hi_off:+.3f} GiB at " + ", ".join(
               f"{k[2]} px rank {k[3]}" for k in both) + " (bf16 frozen, embeddings precomputed). A pair whose ranks ran "
           "under different allocators is put on the expandable footing with that offset, measured at other "
           "configurations than the pair and assumed to hold at its resolution.", "",
           "| resolution | ranks | allocators | allocated GiB | rise GiB | on one footing GiB | the term GiB | sample |",
           "|---|---|---|---|---|---|---|---|"]
    by_setup: dict[tuple, list[tuple[int, str, float]]] = {}  # (frozen, text encoder, resolution) -> (rank, allocator, GiB)
    for a in peak:
        for k, v in peak[a].items():
            by_setup.setdefault(k[:3], []).append((k[3], a, v))
    errors: list[float] = []
    held = 0
    for setup in sorted(by_setup):
        got = sorted(by_setup[setup])
        if len({r for r, _, _ in got}) < 2:
            continue
        same = [(lo, hi) for lo in got for hi in got if lo[0] < hi[0] and lo[1] == hi[1]]
        # every pair within one allocator; a resolution with none, its lowest and highest rank across the two
        pairs = same or [(min(got), max(got))]
        for lo, hi in pairs:
            rise = hi[2] - lo[2]
            term = per_rank * (hi[0] - lo[0])
            if lo[1] == hi[1]:
                footing = f"{rise:+.3f}"
                a = b = rise
            else:  # lift the default allocator's peak onto the expandable footing
                sign = 1 if lo[1] == "default" else -1
                a, b = rise - sign * hi_off, rise - sign * lo_off
                footing = f"{min(a, b):+.3f} to {max(a, b):+.3f}"
            fitted_pair = lo[1] == hi[1] == "default"  # fit_rank reads every default-allocator pair
            if not fitted_pair:
                errors += [a - term, b - term]
                held += 1
            out.append(f"| {setup[2]} | {lo[0]} -> {hi[0]} | {lo[1]} -> {hi[1]} | {lo[2]:.3f} -> {hi[2]:.3f} | "
                       f"{rise:+.3f} | {footing} | {term:+.3f} | {'in-sample' if fitted_pair else 'held out'} |")
    out += ["", f"- the rank term, held-out pairs: {held}; rise on one footing minus the term from {min(errors):+.3f} to "
            f"{max(errors):+.3f} GiB"]
    return out


def table() -> str:
    all_rows = rows()
    for r in all_rows:
        r["weights"] = weights_of(r)
    facts = fit_with_references(all_rows, CONTEXT_STEPS)
    _annotate(all_rows, facts)
    apart = [r for r in all_rows if r["sample"] == AFTER_CALL]
    all_rows = [r for r in all_rows if r["sample"] != AFTER_CALL]
    srows = scorer_rows()
    per_token = fit_scorer(srows)
    head = ("| kind | record | configuration |{} allocated GiB | weights GiB | reserved GiB | NVML GiB | model GiB | "
            "model/NVML | ask GiB | ask/NVML |")
    lines = ["# What the driver sees of a GPU process, per kind: fitted on some H200 records, judged on others",
             "",
             "Made by `.venv/bin/python bench/walls_fit.py --write` from the committed raw records (NVIDIA H200, driver "
             f"580.159.04, torch 2.11.0+cu130; the {FORMS['h100_first']} to {FORMS['h100_last']} runs', gpu-run-h100-*, an NVIDIA "
             "H100 80GB HBM3 with "
             "the same driver and torch; random weights at the real shapes). NVML = the process as the driver saw "
             "it; weights = the resident weights config/models.yaml gives for the configuration; model = allocated x "
             "(1 + allocator_reserve) + (allocated - weights) x activations_reserve (a generator's by reference count, at "
             "least its activations_floor_gib) + cuda_context_gib of its kind; "
             "ask = the wall's VRAM ask for that configuration from config/models.yaml alone (no probe, no provenance).",
             "",
             "## In-sample: every committed record, with the facts config/models.yaml holds now", "",
             head.format(" sample |"), "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(all_rows, key=lambda r: (r["kind"], r["key"], r["record"])):
        lines.append(_row_line(r, True))
    lines += ["", "Left out: " + "; ".join(f"{k[1]} of {k[0].rsplit('/', 1)[-1]}: {why}" for k, why in STALE.items())]
    lines += ["", "## Fitted facts (config/models.yaml `process_overhead`)", ""]
    for kind, f in facts.items():
        refs = f.get("activations_reserve_by_references")
        floor = f.get("activations_floor_gib")
        refs_text = (" (" + ", ".join(f"{v:.3f} at {n} reference(s)" for n, v in refs.items())
                     + (f"; at least {floor:.2f} GiB" if floor else "") + ")") if refs else ""
        lines.append(f"- {kind}: allocator_reserve {f['allocator_reserve']:.3f}, activations_reserve "
                     f"{f['activations_reserve']:.3f}{refs_text}, cuda_context_gib {f['cuda_context_gib']:.2f}{_step_text(f)}; "
                     f"fitted on {f['records']} records of {'; '.join(f['fitted_on'])}")
    brows = build_rows()
    fb = fit_build(brows)
    lines.append(f"- build (rule sizing_model, from the weights alone): allocator_reserve {fb['allocator_reserve']:.3f}, "
                 f"cuda_context_gib {fb['cuda_context_gib']:.2f}; fitted on " + "; ".join(
                     f"{r['component']} ({r['record'].split('/')[2]}: weights {r['weights']:.3f}, torch "
                     f"{r['allocated']:.3f}, NVML {r['nvml']:.3f})" for r in brows))
    e_in = [r["model"] / r["nvml"] - 1 for r in all_rows]
    a_in = [r["ask"] / r["nvml"] - 1 for r in all_rows]
    lines += ["", f"- in-sample records: {len(all_rows)}, model/NVML - 1 from {min(e_in):+.1%} to {max(e_in):+.1%}; "
              f"wall ask/NVML - 1 from {min(a_in):+.1%} to {max(a_in):+.1%}; ask below the driver: "
              f"{sum(e < 0 for e in a_in)}"]
    since: list[dict] = []
    held: dict[str, list[dict]] = {}
    for run in HELDOUT_RUNS:
        hrows = held[run["name"]] = heldout_rows(run)
        before = _facts(run["models_before"])
        _annotate(hrows, before["process_overhead"], before)
        lines += ["", f"## Held out: the {run['name']} run's probes of configurations no fit before it used", "",
                  "Each row is one configuration of a probe record under " + ", ".join(
                      f"`{h.relative_to(REPO).as_posix()}`" for h in run["folders"])
                  + f" (bench/gpu_run.sh), {run['chosen']}, judged by the facts the run was asked with "
                  f"(`{run['models_before'].relative_to(REPO).as_posix()}`, config/models.yaml at commit "
                  f"{run['commit']}: {run['before']}). The fit above reads them now; these figures are the model's "
                  "out-of-sample error.", ""]
        if hrows:
            lines += [head.format(""), "|---|---|---|---|---|---|---|---|---|---|---|"]
            lines += [_row_line(r, False) for r in hrows]
            lines += ["", _errors(f"held-out configurations ({run['name']} run)", hrows)]
        else:
            lines.append("- held-out configurations: none recorded yet")
        if run["name"] == FORMS["floor_from"] or since:
            since += hrows
    judged = [r for r in since if r["component"] != "detector"]
    lines += ["", "## Held out since the floor", "",
              f"Every held-out configuration from the {FORMS['floor_from']} run on (the first judged by the floor under the "
              "generators' pool, as committed), as the sections above judged it:", "",
              _errors(f"since the floor, OmniGen2, LoRA and scorer configurations, the {FORMS['floor_from']} to "
                      f"{HELDOUT_RUNS[-1]['name']} runs", judged),
              _errors("since the floor, detector configurations", [r for r in since if r not in judged])]
    lines += ["", "## Detector calls after another in the same process: set apart", "",
              "A detector probe's later configurations ran in the process of its first, and the pool kept that call's "
              "blocks; no job calls so (a keypoints job calls one image at a time). Set apart from the fit since the "
              f"{FORMS['after_call_since']} run (`AFTER_CALL`), asked here by the facts config/models.yaml holds now:", "",
              head.format(""), "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [_row_line(r, False) for r in sorted(apart, key=lambda r: (r["config"]["images_per_call"], r["record"]))]
    lines += ["", _errors("detector calls after another in their process", apart)]
    lines += expandable_lines()
    lines += judged_lines()
    lines += rank_lines(all_rows)
    lines += autocast_lines(all_rows, held)
    lines += ["", "## The walls' form against a bounded slack, each fitted on the records before a run", "",
              f"The {FORMS['bounded_suggested_by']} run's records showed the pool's slack growing slower than a pass's activations (the detector "
              "0.23 GiB of slack at 0.76 GiB of activations, 0.44 at 2.89), so the linear form over-asks large passes. "
              "A bounded form (`fit_bounded`: slack = allocated x reserve + min(activations x reserve, cap)) fits the "
              "records more tightly; judged out of sample, each form fitted on the records before a run and given "
              "that run's held-out probes' allocated peaks (model/NVML - 1):", ""]
    lines += bounded_lines()
    lines += ["", "The bounded form falls below the driver whenever a larger pass shows more slack than any before it; "
              "the walls keep the linear envelope."]
    gaps = precision_gaps(all_rows)
    lines += ["", "## An NF4 activations offset, each fitted on the records before a run", "",
              "The activation tables hold bf16's passes. At every size and reference count with both precisions "
              f"measured ({len(gaps)} pairs), an OmniGen2 NF4 pass allocated {-max(gaps):.3f}-{-min(gaps):.3f} GiB less "
              "over its weights than bf16's (`fit_precision_offset` on every record: "
              f"{fit_precision_offset(all_rows):+.3f} GiB). Asking NF4 with that offset, fitted on the records before "
              "each run alone, judged on that run's held-out NF4 probes (wall ask/NVML - 1, by the facts the run was "
              "asked with):", ""]
    lines += offset_lines()
    lines += ["", "The offset brings rows under +10%, but it also takes the margin that covered the table's error (a "
              "size scaled from another, or an entry measured at fewer references) and the reserve's own held-out "
              "shortfall, and held-out configurations fall below the driver, the unsafe direction: the walls do not "
              "take it."]
    shares: dict[int, list[float]] = {}  # the pool's slack over the pass's activations, OmniGen2 NF4
    for r in all_rows:
        if r["key"].startswith("generator/omnigen2/nf4/") and r["reserved"] is not None:
            shares.setdefault(r["config"]["references"], []).append(
                (r["reserved"] - r["allocated"]) / (r["allocated"] - r["weights"]))
    lines += ["", "## A reserve per reference count, each fitted on the records before a run", "",
              "The pool's slack over a generator pass's activations grows with its references (OmniGen2 NF4: "
              + ", ".join(f"{min(v):.2f}-{max(v):.2f} at {n}" for n, v in sorted(shares.items()))
              + "), and one envelope per kind is set by the most. Each run's held-out "
              "OmniGen2 probes, given their allocated peaks, by the walls' form fitted on the records before the run, "
              "and by the same form fitted apart per reference count (at least 3 records of the kind and count):", ""]
    lines += per_reference_lines()
    lines += ["", "Fitted apart, the envelope is set by fewer records and a new configuration exceeds it: the walls do not "
              "take an envelope per count."]
    lines += ["", "## A reserve by reference count: one step per reference fewer, fitted on the records before each run",
              "", "Each generator kind keeps its envelope (set by the most references) and steps down by one amount "
              "per reference fewer, the largest step that covers every record of fewer references (`by_references`; "
              f"chosen after the {FORMS['by_references_after']} run, judged here on every run's held-out generator probes before any "
              "run of it). Each run's held-out generator probes (OmniGen2 and Qwen-Image-Edit, bf16 and NF4) asked by "
              "the facts that run was asked with, without and with the step fitted on the records before that run "
              "(wall ask/NVML - 1):", ""]
    lines += references_lines()
    lines += ["", "## A floor under the generators' pool: the step with a floor, fitted on the records before each run",
              "", "At 1 reference OmniGen2's pool kept a share of a pass that falls as the pass grows (NF4: 0.66 of "
              "its activations at 512 px, 0.39 at 1024; bf16 over its allocator reserve 0.69 and 0.43): a step alone "
              "is set by the smallest pass and over-asks the large ones, and a size below the smallest measured, "
              "whose activations scale down, would take less than the pool keeps. The walls' form since the "
              f"{FORMS['floor_since']} run: the pool keeps the larger of the count's share and a floor per kind "
              "(`activations_floor_gib`; `by_references_floored`: the least floor covering every record the step "
              "leaves uncovered, the step whose asks hold the least slack over the records). Each run's held-out "
              "generator probes asked by the facts that run was asked with, the step refitted on the records before "
              "that run, without and with the floor (wall ask/NVML - 1):", ""]
    lines += floor_lines()
    lines += ["", "## RAM: each record's peak resident memory against the RAM wall's ask", "",
              "The ask (fourloops.asks, config/models.yaml): the largest component mapped in bf16 + the host process + "
              "any component cast in host memory. Its form was chosen after Qwen-Image-Edit's NF4 load of the "
              f"{FORMS['ram_form_after']} "
              "run was measured (peak RSS 16.4 GiB of a 53.7 GiB model, 1.4 GiB of it anonymous): every row is "
              "in-sample. Peak RSS counts the mapped safetensors pages, which the kernel can drop.", "",
              "| record | configuration | peak RSS GiB | of it anonymous GiB | RAM ask GiB | ask/RSS |", "|---|---|---|---|---|---|"]
    ram_rows = [r for r in all_rows + apart if r.get("rss") is not None]  # a later call's process is a process
    for r in ram_rows:
        r["ram_ask"] = asked(r).ram.value
        anon = "-" if r.get("rss_anon") is None else f"{r['rss_anon']:.2f}"
        lines.append(f"| {_label(r['record'])} | {r['key']} | {r['rss']:.2f} | {anon} | {r['ram_ask']:.2f} | "
                     f"{r['ram_ask'] / r['rss']:.2f} |")
    ratios = [r["ram_ask"] / r["rss"] for r in ram_rows]
    lines += ["", f"- records with a peak RSS: {len(ram_rows)}, RAM ask/peak RSS from {min(ratios):.2f} to "
              f"{max(ratios):.2f}; ask below the peak: {sum(x < 1 for x in ratios)}"]
    lines += ["", "## The scorer's prompt (EditScore's SC and PQ questions, grades_gpu records)", "",
              f"Activations per prompt token fitted on the bf16 SC answer: {per_token:.6f} GiB a token (config/models.yaml `qwen3_vl_8b.activations_gib_per_prompt_token`).", "",
              "| record | precision | question | sample | weights GiB | prompt tokens | peak GiB | weights + tokens x per-token GiB | model/peak |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in srows:
        model = r["weights"] + r["tokens"] * per_token
        lines.append(f"| {_label(r['record'])} | {r['precision']} | {r['question']} | {r['sample']} | "
                     f"{r['weights']:.3f} | {r['tokens']} | {r['peak']:.3f} | {model:.3f} | {model / r['peak']:.4f} |")
    return "\n".join(lines) + "\n"


def fit_detector_batch(all_rows: list[dict]) -> tuple[float, float]:
    """(one image's activations at 576 px, the share of them a batched call holds once): from the detector's probes,
    the batch-1 record's pass over its weights, rounded up, and the largest share that keeps one image's activations
    x (share + (1 - share) x b) at or over every probe of b > 1 images a call, rounded down (a wall errs high)."""
    det = [r for r in all_rows if r["component"] == "detector" and r["config"].get("resolution") == 576]
    act = {}
    for r in det:
        b = int(r["config"].get("images_per_call", 1))
        act[b] = max(act.get(b, 0.0), r["allocated"] - weights_of(r))
    one = _up(act[1], 3)
    share = min((b - a / one) / (b - 1) for b, a in act.items() if b > 1)
    return one, math.floor(share * 1000 + 1e-9) / 1000


def fit_rank(all_rows: list[dict]) -> float:
    """GiB a LoRA step's process holds per unit of rank (the adapters and their 8-bit optimizer state): the largest
    allocated peak's rise per rank between two records of one setup and resolution at different ranks, rounded up."""
    by: dict[tuple, dict[int, list[float]]] = {}
    for r in all_rows:
        if r["kind"] == "training":
            c = r["config"]
            by.setdefault((c["frozen_dtype"], c["text_encoder"], c["resolution"]), {}).setdefault(
                int(c.get("rank", 8)), []).append(r["allocated"])
    rises = [(max(ranks[hi]) - min(ranks[lo])) / (hi - lo) for ranks in by.values()
             for lo in ranks for hi in ranks if hi > lo]
    return _up(max(rises), 4)


CAST_BEFORE = 1.25  # config/models.yaml autocast_cast_gib before fit_autocast, the fp32 step's excess as a constant


def fp32_excess(row: dict, facts: dict | None = None, per_rank: float | None = None) -> tuple[float, float]:
    """A LoRA step record's (table activations, excess): the activations models.yaml's lora_step table gives its
    resolution, and what its allocated peak held beyond its frozen weights, those activations and its adapters (rank
    x lora_gib_per_rank, or `per_rank`): what a step with fp32 frozen weights adds that the walls must ask over the
    table."""
    from fourloops import asks

    facts = facts or _facts()
    model = facts["models"]["omnigen2"]
    c = row["config"]
    act = asks._activation(model, "lora_step", int(c["resolution"]), facts.get("activations_between"))
    rank = int(c.get("rank", 8)) * (float(model.get("lora_gib_per_rank", 0.0)) if per_rank is None else per_rank)
    return act, row["allocated"] - weights_of(row, facts) - act - rank


def fit_autocast(all_rows: list[dict], per_rank: float | None = None) -> tuple[float, float]:
    """(autocast_cast_gib, autocast_activations_share): the smallest linear envelope (least total slack, scipy's
    linprog) over every in-sample fp32-frozen LoRA step's excess (fp32_excess) against its table activations, each
    rounded up (a wall errs high). A constant alone (CAST_BEFORE, fp32 minus bf16 at 256 and 512 px) left
    the estimate short of the allocated peak at 384 px with the encoder and above, and 0.31 GiB short at 768 px, where
    the walls' overheads covered it by 11 MiB."""
    from scipy.optimize import linprog

    pts = [fp32_excess(r, per_rank=per_rank) for r in all_rows
           if r["kind"] == "training" and r["config"]["frozen_dtype"] == "fp32" and r["sample"] == "in-sample"]
    lp = linprog([len(pts), sum(a for a, _ in pts)], A_ub=[[-1.0, -a] for a, _ in pts], b_ub=[-x for _, x in pts],
                 bounds=[(0, None), (0, None)])
    const, share = (float(x) for x in lp.x)
    return _up(const, 3), _up(share, 3)


def autocast_lines(all_rows: list[dict], held: dict[str, list[dict]]) -> list[str]:
    """The fp32 frozen weights' excess per record: in-sample against config/models.yaml's term; each held-out run's
    (`held`: run name -> its heldout_rows, as table() read them) against the term its models-before.yaml gave."""
    now = _facts()
    model = now["models"]["omnigen2"]
    const, share = model.get("autocast_cast_gib", 0.0), model.get("autocast_activations_share", 0.0)
    out = ["", "## The fp32 frozen weights' excess over the LoRA step's table", "",
           "A step whose frozen transformer is fp32 (bf16 autocast) holds more than its weights, the lora_step table's "
           f"activations and its adapters. The walls ask autocast_cast_gib ({const:g}) + autocast_activations_share "
           f"({share:g}) x the table's activations (fit_autocast, on the in-sample records below). Excess minus term "
           "above 0 is an estimate short of the allocated peak, which only the overheads then cover.", "",
           "The last two columns: the wall's ask over NVML with those facts, and with the constant alone "
           f"({CAST_BEFORE:g} GiB, the form before the {FORMS['fp32_term_before']} run) in their place.", "",
           "| record | resolution | encoder | rank | table activations GiB | excess GiB | term GiB | excess - term GiB | "
           "sample | ask/NVML | the constant alone: ask/NVML |", "|---|---|---|---|---|---|---|---|---|---|---|"]

    def constant_alone(facts: dict) -> dict:
        alone = copy.deepcopy(facts)
        alone["models"]["omnigen2"]["autocast_cast_gib"] = CAST_BEFORE
        alone["models"]["omnigen2"].pop("autocast_activations_share", None)
        return alone

    def line(r: dict, facts: dict, alone: dict, sample: str) -> tuple[str, float]:
        m = facts["models"]["omnigen2"]
        act, excess = fp32_excess(r, facts)
        term = m.get("autocast_cast_gib", 0.0) + m.get("autocast_activations_share", 0.0) * act
        c = r["config"]
        rec = r["record"].split("bench/results/")[-1]
        return (f"| {rec} | {c['resolution']} | {c['text_encoder']} | {c.get('rank', 8)} | {act:.3f} | {excess:+.3f} | "
                f"{term:.3f} | {excess - term:+.3f} | {sample} | {asked_gib(r, facts)[0] / r['nvml']:.3f} | "
                f"{asked_gib(r, alone)[0] / r['nvml']:.3f} |", excess - term)

    errs: dict[str, list[float]] = {}
    now_alone = constant_alone(now)
    for r in sorted((r for r in all_rows if r["kind"] == "training" and r["config"]["frozen_dtype"] == "fp32"),
                    key=lambda r: (r["config"]["resolution"], r["record"])):
        text, e = line(r, now, now_alone, "in-sample")
        out.append(text)
        errs.setdefault("in-sample", []).append(e)
    for run in HELDOUT_RUNS:
        fp32 = [r for r in held[run["name"]] if r["kind"] == "training" and r["config"]["frozen_dtype"] == "fp32"]
        facts = _facts(run["models_before"])
        alone = constant_alone(facts) if fp32 else facts
        for r in fp32:
            text, e = line(r, facts, alone, f"held out ({run['name']}), its models-before.yaml's term")
            out.append(text)
            errs.setdefault(run["name"], []).append(e)
    out.append("")
    out += [f"- fp32 excess minus term, {k}: {len(v)} records, {min(v):+.3f} to {max(v):+.3f} GiB, short: "
            f"{sum(1 for e in v if e > 0)}" for k, v in errs.items()]
    return out


def precision_gaps(all_rows: list[dict], model: str = "omnigen2", precision: str = "nf4") -> list[float]:
    """Per size and reference count the records hold at both precisions: GiB the generator's pass at `precision`
    allocated over its weights beyond (negative: short of) its bf16 pass, which the activation tables hold (the
    largest at `precision` against the smallest at bf16)."""
    acts: dict[tuple, dict[str, list[float]]] = {}
    for r in all_rows:
        if r["component"] == "generator" and r["key"].split("/")[1] == model:
            c = r["config"]
            acts.setdefault((c["size"], c["references"]), {}).setdefault(r["precision"], []).append(
                r["allocated"] - r["weights"])
    return [max(by[precision]) - min(by["bf16"]) for by in acts.values() if precision in by and "bf16" in by]


def fit_precision_offset(all_rows: list[dict], model: str = "omnigen2", precision: str = "nf4") -> float:
    """The offset a pass at `precision` would take from bf16's activation table: the largest gap (the smallest
    shortfall), rounded up (a wall errs high); 0 where the records hold no pair or a pass at `precision` held more.
    OmniGen2 at NF4 holds less by a constant, not by a share of the pass. Judged out of sample (offset_lines), not
    taken by the walls."""
    gaps = precision_gaps(all_rows, model, precision)
    return min(0.0, _up(max(gaps), 3)) if gaps else 0.0


def fitted() -> dict:
    """The facts the committed records give (tests compare config/models.yaml with these)."""
    all_rows = rows()
    for r in all_rows:
        r["weights"] = weights_of(r)
    one, share = fit_detector_batch(all_rows)
    per_rank = fit_rank(all_rows)
    return {"process_overhead": {**fit_with_references(all_rows, CONTEXT_STEPS), "build": fit_build(build_rows())},
            "process_overhead_expandable": fit_expandable(),
            "activations_gib_per_prompt_token": fit_scorer(scorer_rows()),
            "lora_gib_per_rank": per_rank,
            "autocast": fit_autocast(all_rows, per_rank),
            "detector_activations_576": one, "activations_batch_shared": share}


_HELD_LINE = re.compile(r"- held-out configurations \((?P<run>.+?) run(?:, (?P<how>[^)]*))?\): (?P<n>\d+), wall ask/NVML - 1 "
                        r"from (?P<a0>\S+) to (?P<a1>\S+); below the driver: (?P<below>\d+); over \+10%: (?P<over>\d+); "
                        r"model/NVML - 1 from (?P<m0>\S+) to (?P<m1>\S+)$")


def heldout_table_rows(text: str) -> list[str]:
    """The table's held-out summary lines as docs/walls-history.md's table rows (run, allocator, configurations, wall
    ask/NVML - 1, below the driver, over +10%, model/NVML - 1), in the table's order."""
    rows = []
    for line in text.splitlines():
        if line.startswith("- held-out configurations"):
            m = _HELD_LINE.fullmatch(line)
            if m is None:
                raise ValueError(f"a held-out line of {TABLE.name} in no known form: {line!r}")
            how = m["how"] or "default"
            rows.append(f"| {m['run']} | {how} | {m['n']} | {m['a0']} to {m['a1']} | {m['below']} | {m['over']} | "
                        f"{m['m0']} to {m['m1']} |")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {TABLE.relative_to(REPO)}")
    ap.add_argument("--rows", action="store_true", help="print the held-out rows of docs/walls-history.md's table only")
    args = ap.parse_args(argv)
    text = table()
    if args.rows:
        print("\n".join(heldout_table_rows(text)))
        return 0
    if args.write:
        TABLE.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
