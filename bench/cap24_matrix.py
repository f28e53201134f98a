"""The 24 GiB confusion matrix of a GPU run: the desk walls' verdict on each GPU job against what the job did
under a 24 GiB cap (FOURLOOPS_VRAM_CAP_GIB=24, torch.cuda.set_per_process_memory_fraction) on the big card.

    .venv/bin/python bench/cap24_matrix.py RUN_DIR [--write]

RUN_DIR holds what bench/gpu_run.sh brought back, unpacked:
- plan-before-desk.json: `fourloops plan --machine desk` of the capped DAG (the jobs the desk's walls admit);
- cap24-refused-plan.json and cap24-refused.log: the seeds' LoRA setup, planned for the desk, then run capped
  on a machine whose walls let it start (the H200's);
- sizing/results/provenance/**.json: the capped jobs' records (the cap applied, torch and NVML peaks, peak RSS);
- qwen/*.json, where the run probed Qwen-Image-Edit: its probe records (bench/sizing_gpu.py, one process a
  precision), the NF4 one uncapped (its RAM), the bf16 one under the cap; their desk verdict is the walls' of
  config/models.yaml now (no plan was made of them before the run).
A job that completes leaves its record; one that fails leaves none, and its log names the error.
--write puts the matrix beside them as cap24.md (a test regenerates the committed one from its records).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_table import REPO, _job, cli  # noqa: E402

COLUMNS = ("rule", "job", "desk walls", "asked GiB", "cap GiB", "under the cap", "NVML peak GiB", "torch peak GiB",
           "RAM asked GiB", "peak RSS GiB")
GPU_RULES_SKIPPED = {"sizing_model", "probe_model"}  # setup jobs: the desk never runs them for real


def _records(run_dir: Path) -> dict:
    out = {}
    for p in sorted(run_dir.rglob("provenance/**/*.json")):
        rec = json.loads(p.read_text())
        out[(rec.get("rule"), _job(rec))] = rec
    return out


STOPPED = "Exiting because a job execution failed"  # Snakemake's line when it stops starting jobs after a failure
CUT = "not run (the log ends mid-run: the machine was lost)"  # bench/gpu_run.sh appends "exit N" when Snakemake ends


def _cut(log: str) -> bool:
    """A capped log with no "exit N" line: the machine went away mid-run."""
    return bool(log) and re.search(r"^exit -?\d+$", log, re.M) is None


def _failure(log: str, rule: str, wildcards: dict | None = None) -> str | None:
    """What the capped run's log says of a failed job of `rule`, or None when it did not fail. With `wildcards`, the
    job's own error block (Snakemake prints the job's log in it, whose first line names the rule and its wildcards),
    where the log holds such lines; else any error of the rule."""
    blocks = [b.split("\nError in rule ", 1)[0] for b in log.split(f"Error in rule {rule}:")[1:]]
    tag = f"rule {rule} wildcards {dict(wildcards)!r}" if wildcards is not None else None
    if tag is not None and any(f"rule {rule} wildcards " in b for b in blocks):
        blocks = [b for b in blocks if tag in b]
    if not blocks:
        return None
    return ("out of memory" if any("OutOfMemoryError" in b or "CUDA out of memory" in b for b in blocks)
            else "failed (not memory)")


def _scheduled(log: str) -> dict:
    """(rule, job) -> the VRAM (GiB) the capped run's Snakemake scheduled each job with (`resources: ... vram_mb=N`):
    the walls' ask as that run made it. The plan beside it was made with `--machine desk` by the desk's own
    allocator setting, while a run under bench/gpu_run.sh GPU_RUN_ALLOC=expandable ran, and was asked, with
    expandable segments in every process."""
    out = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", log):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        mb = re.search(r"^\s+resources: .*\bvram_mb=(\d+)", block, re.M)
        if rule and mb:
            wc = re.search(r"^\s+wildcards: (.*)$", block, re.M)
            job = ",".join(sorted(w.strip() for w in wc.group(1).split(","))) if wc else "-"
            out[(rule.group(1), job)] = round(int(mb.group(1)) / 1024, 2)
    return out


def _allowed(log: str) -> str | None:
    """The pool limit torch's OutOfMemoryError names ("... 23.49 GiB allowed"): the cap as torch applied it."""
    m = re.search(r"([0-9.]+) GiB allowed", log)
    return None if m is None else f"{m.group(1)} (torch's pool)"


def rows(run_dir: Path) -> list[dict]:
    """Each GPU job the desk plans would run: an admitted one by its capped record (none: it did not complete, and
    the capped run's log says why), a refused one by the capped log of the run that let it start."""
    records = _records(run_dir)
    logs = {"plan-before-desk.json": run_dir / "cap24-admitted.log", "cap24-refused-plan.json": run_dir / "cap24-refused.log"}
    out, seen = [], set()
    for plan, log_path in logs.items():
        if not (run_dir / plan).exists():
            continue  # the seeds' LoRA was not run capped this time (bench/gpu_run.sh GPU_RUN_SEEDS_LORA)
        log = log_path.read_text() if log_path.exists() else ""
        scheduled = _scheduled(log)
        for j in json.loads((run_dir / plan).read_text())["jobs"]:
            j = {**j, "vram_gib": scheduled.get((j["rule"], _job(j)), j["vram_gib"])}
            key = (j["rule"], _job(j))
            if j["vram_gib"] <= 0 or j["rule"] in GPU_RULES_SKIPPED or not j.get("reason", "to run"):
                continue  # no GPU, a setup job, or up to date: nothing to judge
            if j["verdict"] != "fits":
                out.append({**_row(j, None, _failure(log, j["rule"]) or "not run"), "cap GiB": _allowed(log)})
            elif key not in seen and (plan == "plan-before-desk.json" or key in records):
                seen.add(key)  # the refused run's plan also holds jobs it shares with the DAG (the embeddings)
                out.append(_row(j, records.get(key), None if key in records else
                                _failure(log, j["rule"], j.get("wildcards") or {})
                                or ("not run (the run stopped first)" if STOPPED in log else
                                    CUT if _cut(log) else "no record")))
    out += probe_rows(run_dir)
    for key, rec in records.items():  # a capped job neither desk plan listed: no verdict to judge
        if rec.get("vram_cap_gib") is not None and key not in seen and key[0] not in GPU_RULES_SKIPPED:
            out.append({**_row({"rule": key[0], "wildcards": rec.get("wildcards"), "verdict": "fits",
                                "refused_walls": [], "vram_gib": None}, rec, None), "desk walls": "not in a plan"})
    return out


def probe_rows(run_dir: Path) -> list[dict]:
    """Qwen-Image-Edit's probes (bench/gpu_run.sh qwen_image): the desk walls' verdict on a generate job of that
    configuration, against what its process did (under the cap, or not capped at all). The verdict is the one asked
    before the run where the run recorded it (plan-qwen.txt: the facts of its commit, models-before.yaml), else
    today's facts' (the earliest runs recorded none)."""
    from fourloops import asks, machines, walls

    before = run_dir / "models-before.yaml"
    facts = asks.load_facts(before if (run_dir / "qwen" / "plan-qwen.txt").exists() else REPO / "config" / "models.yaml")
    desk = machines.load(REPO / "config" / "machines.yaml")
    out = []
    for path in sorted((run_dir / "qwen").glob("generator-*.json")):
        rec = json.loads(path.read_text())
        settings = rec.get("settings") or rec["apparatus"]["settings"]
        ask = asks.generator_ask(facts, {**settings, "device": "cuda"}, n_references=1)
        refused = [r for r in walls.check_job(walls.PendingJob("generate", path.name, "desk", ask),
                                              machines.machine(desk, "desk")) if not r.ok]
        error = rec.get("error") or ""
        capped = rec.get("vram_cap") is not None or "GiB allowed" in error
        outcome = ("ran without the cap" if not capped else "completed" if not error else
                   "out of memory" if "OutOfMemoryError" in error else "failed (not memory)")
        conf = (rec.get("configurations") or [{}])[0]
        out.append({"rule": "generate (probe)", "job": f"{settings['backend']} {settings['precision']} {settings['size']}",
                    "desk walls": "admitted" if not refused else "refused (" + ", ".join(r.wall for r in refused) + ")",
                    "asked GiB": round(ask.vram.value, 3), "cap GiB": _allowed(error) or (rec.get("vram_cap") or {}).get("vram_cap_gib"),
                    "under the cap": outcome, "NVML peak GiB": conf.get("nvml_process_gib"),
                    "torch peak GiB": conf.get("peak_vram_gib"), "RAM asked GiB": round(ask.ram.value, 2),
                    "peak RSS GiB": None if rec.get("peak_rss_mib") is None else round(rec["peak_rss_mib"] / 1024, 3)})
    return out


def _row(job: dict, rec: dict | None, failed: str | None) -> dict:
    cap = None if rec is None else rec.get("vram_cap_gib")
    if rec is not None and not rec.get("vram_cap_applied"):
        failed = "ran without the cap"
    outcome = failed or ("completed" if rec is not None else "no record")

    def gib(key: str) -> float | None:
        return None if rec is None or rec.get(key) is None else round(rec[key], 3)

    return {"rule": job["rule"], "job": _job(job), "desk walls": "admitted" if job["verdict"] == "fits" else
            "refused (" + ", ".join(w["wall"] for w in job["refused_walls"]) + ")",
            "asked GiB": job["vram_gib"], "cap GiB": cap,
            "under the cap": outcome, "NVML peak GiB": gib("nvml_peak_gib"), "torch peak GiB": gib("peak_vram_gib"),
            "RAM asked GiB": job.get("ram_gib"),  # a plan older than the RAM ask carries none
            "peak RSS GiB": None if rec is None else round(rec["peak_rss_mib"] / 1024, 3)}


def counts(body: list[dict]) -> dict:
    adm = [r for r in body if r["desk walls"] == "admitted"]
    ref = [r for r in body if r["desk walls"].startswith("refused")]
    ran = [r for r in adm if r["under the cap"] != "ran without the cap"]
    # a false admit: out of memory, or no record and nothing in the log to say why (it may have been memory); a job
    # that failed for another reason (a missing package) or that Snakemake never started has no verdict to judge
    other = [r for r in ran if r["under the cap"] in ("failed (not memory)", "not run (the run stopped first)", CUT)]
    out = {"admitted, completed under the cap": sum(r["under the cap"] == "completed" for r in ran),
           "admitted, failed under the cap (false admits)": sum(r["under the cap"] != "completed" and r not in other
                                                                for r in ran),
           "admitted, not run under the cap": len(adm) - len(ran),
           "refused, out of memory under the cap": sum(r["under the cap"] == "out of memory" for r in ref),
           "refused, completed under the cap (false refusals)": sum(r["under the cap"] == "completed" for r in ref),
           "refused, not run or failed otherwise": sum(r["under the cap"] not in ("out of memory", "completed")
                                                       for r in ref)}
    if other:  # listed only where a run had them (a run whose machine lacked OmniGen2's package)
        out["admitted, failed under the cap for another reason or not started: no verdict"] = len(other)
    return out


def matrix(run_dir: Path) -> str:
    body = rows(run_dir)
    shown = run_dir.resolve()
    shown = shown.relative_to(REPO) if shown.is_relative_to(REPO) else run_dir
    cell = lambda v: "-" if v is None else str(v)  # noqa: E731
    lines = [f"# The 24 GiB confusion matrix of {run_dir.name}", "",
             f"Made by `.venv/bin/python bench/cap24_matrix.py {shown.as_posix()} --write` from the desk plans and"
             " the capped jobs' records and logs.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(r[c]) for c in COLUMNS) + " |" for r in body]
    rss = [r["peak RSS GiB"] for r in body if r["peak RSS GiB"] is not None]
    lines += ["", "## Summary", ""] + [f"- {k}: {v}" for k, v in counts(body).items()]
    if rss:
        lines.append(f"- peak RSS of the completed jobs: {min(rss)}-{max(rss)} GiB")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    return cli(matrix, "cap24.md", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
