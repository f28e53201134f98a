"""What the full real ladder costs on a pod, simulated before one is rented: billed pod-seconds against
GPU-busy seconds, the floor, and `fourloops plan --machine pod`'s forecast against the simulated bill.

    .venv/bin/python bench/pod_bill.py [--probes DIR_OR_FILE ...] [--configfile F ...] [--json OUT]

The run: the real model set, the four conditions x 8 views, the LoRA with `lora.profile: pod`, restyle and
grades (targets results/ladder.csv and results/grades/<style>.csv), planned by `fourloops plan --machine pod`
in an empty working directory: its jobs, their forecast seconds (models.yaml), what each needs, the MB each
moves. The pod's life is config/pod_life.yaml (the figures the RunPod stand-in plays in scaled time), here on
a virtual clock: desk jobs on the profile's 2 local cores, pod jobs on the pod, every pod interval given
a cause (fourloops.podbill.attribute).

Each lever of the bill is a switch of the simulated executor; the table shows every lever off, each one
switched on alone, the shipped executor (what it does), and each lever switched off from all-on:
  overlap   the weights download starts beside the environment install (runpod.fetch), not after it
  reuse     one pod for every pod job of the run (pool of 1), not a pod per job
  prefetch  the next job's inputs move while the current job runs
  asap      the pod goes as soon as no pod job remains, not after idle_teardown_s (300 s) or the run's end
  load1     each model loaded once per job, not once per view
  ranked    of the pod jobs waiting for the pod, the one whose model downloads first goes first (the pool's
            rank), not the first to ask
  early     the download starts from the pod's start command as the container starts (runpod.fetch_at:
            container), 90 s before ssh answers, not after the sync (needs overlap)
Floor (issue 23's) = image pull + max(setup, first model's download) + GPU-busy + teardown. With `early` the
download no longer starts with the setup, so a second floor follows the pod's life (fourloops.podbill.
floor_container_s): pull + null runtime + max(first download, stale ssh + repo sync + setup) + GPU + teardown.

Which is which: the forecast is fourloops.podbill.forecast (the plan's closed form: the pod jobs in a row on one
pod); the simulation is `simulate` below (an event clock: the DAG's readiness, desk jobs on 2 cores, each pod's
timeline, podbill.attribute). Both read config/pod_life.yaml's figures, so they agree wherever the run is a
row of pod jobs; the stand-in run (tests/test_pod_bill.py) is the model of a pod's life the executor itself drives.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from fourloops import plan as planmod, podbill  # noqa: E402
from fourloops.asks import load_facts  # noqa: E402
from fourloops.tables import format_table  # noqa: E402

LEVERS = ("overlap", "reuse", "prefetch", "asap", "load1", "ranked", "early")
SHIPPED = {"overlap": True, "reuse": True, "prefetch": False, "asap": True, "load1": True, "ranked": True,
           "early": True}  # the executor
IDLE_TEARDOWN_S = 300.0  # machines.yaml pod.runpod.idle_teardown_s
LOCAL_CORES = 2  # profiles/pod local-cores


def probe_records(probes: list[Path]) -> dict[str, Path]:
    """The probe records `probes` names, by file name: a directory's *.json, or a record given as a file (one
    component's probe from another lease of the same machine kind, say). Two records of one name are refused: the
    plan would time a job by whichever came last."""
    found: dict[str, Path] = {}
    for p in probes:
        p = Path(p)
        if not p.exists():
            raise SystemExit(f"--probes {p}: no such file or directory; allowed: a directory of probe records "
                             f"(results/probe/<machine>/) or one record's .json")
        for f in sorted(p.glob("*.json")) if p.is_dir() else [p]:
            rec = json.loads(f.read_text())
            if not (isinstance(rec, dict) and "key" in rec):
                continue
            if f.name in found:
                raise SystemExit(f"--probes: two probe records named {f.name}: {found[f.name]} and {f}; "
                                 f"allowed: one record a component (name one of them as a file, not both directories)")
            found[f.name] = f
    return found


def planned(probes: list[Path] = (), style: str = "watercolor", configfiles: list[Path] = ()) -> dict:
    """The plan on the pod; with `probes` (directories of probe records, or records), those records time the jobs,
    as if the pod were the machine they ran on (their machine_name becomes pod: the plan times a job only by the
    target's own probe); `configfiles` over the config (a batch, say)."""
    configfiles = [str(Path(c).resolve()) for c in configfiles]  # before the plan's working directory is the scratch one
    records = probe_records(list(probes))
    with tempfile.TemporaryDirectory() as work:
        if records:
            dest = Path(work) / "results" / "probe" / "pod"
            dest.mkdir(parents=True)
            for name, f in records.items():
                (dest / name).write_text(json.dumps({**json.loads(f.read_text()), "machine_name": "pod"}))
        cfg = Path(work) / "lora_pod.yaml"
        cfg.write_text("lora:\n  profile: pod\n")
        cwd = os.getcwd()
        os.chdir(work)
        try:
            p = planmod.run(["-s", str(REPO / "Snakefile"), "--configfile", str(cfg),
                             *configfiles, "--",
                             "results/ladder.csv", f"results/grades/{style}.csv"], "pod")
        finally:
            os.chdir(cwd)
        for j in p["jobs"]:  # the scratch directory is gone once we return
            j["seconds_source"] = j["seconds_source"].replace(str(Path(work).resolve()) + "/", "").replace(work + "/", "")
        return p


@dataclass
class SimPod:
    t_create: float
    timeline: list = field(default_factory=list)
    free_at: float = 0.0  # when it can start the next job's transfer
    model_ready: dict = field(default_factory=dict)  # model -> when its weights are in
    loaded_dl_end: float = 0.0  # serial downloads: when the last one ends
    t_end: float | None = None
    last_job_end: float = 0.0


def simulate(jobs: list[dict], life: podbill.PodLife, weights: dict, facts: dict, repo_mb: float, levers: dict,
             fetch_order: list[str]) -> dict:
    """Run the plan's jobs on a virtual clock; the pods' timelines and their attribution. `fetch_order`: the
    models in the order the pod downloads them (the executor's: first use in the plan's order)."""
    rank = {m: i for i, m in enumerate(fetch_order)}
    by_out = {j["output"]: j for j in jobs}
    done: dict[str, float] = {}  # output -> finish time
    cores = [0.0] * LOCAL_CORES
    pods: list[SimPod] = []
    pod = None
    pending = list(jobs)

    def seconds(j):
        s = j["seconds"]
        if not levers["load1"]:
            m = re.search(r"(\d+) views", j["seconds_source"])
            load = float(((facts["models"].get(j["model"]) or {}).get("seconds") or {}).get("load", 60))
            s += (int(m.group(1)) - 1) * load if m else 0.0
        return s

    def new_pod(t) -> SimPod:
        p = SimPod(t)
        pulled = t + life.pull_s
        up = pulled + life.ready_s
        p.timeline += [("pull", t, pulled), ("ready", pulled, up), ("transfer", up, up + life.transfer_s(repo_mb))]
        t_setup = up + life.transfer_s(repo_mb)
        p.timeline.append(("setup", t_setup, t_setup + life.setup_s))
        p.free_at = t_setup + life.setup_s
        if levers["overlap"]:  # every model of the run, one after another, from the setup's start
            acc = pulled + life.runtime_null_s if levers["early"] else t_setup
            for m in fetch_order:
                d = life.download_s(weights[m])
                p.timeline.append(("download", acc, acc + d))
                acc += d
                p.model_ready[m] = acc
        else:
            p.loaded_dl_end = p.free_at
        pods.append(p)
        return p

    def ready_at(j) -> float | None:
        if any(n in by_out and n not in done for n in j["needs"]):
            return None
        return max([done[n] for n in j["needs"] if n in done] or [0.0])

    prefetched: set[str] = set()
    while pending:
        # the job that can start first; pod jobs among equals by their model's rank (ranked), else the plan's order
        best = None
        for j in pending:
            r = ready_at(j)
            if r is None:
                continue
            if j["profile"] == "pod":
                start = max(r, pod.free_at) if (pod is not None and levers["reuse"]) else r
            else:
                start = max(r, min(cores))
            key = (start, rank.get(j["model"], 0) if levers["ranked"] and j["profile"] == "pod" else 0)
            if best is None or key < best[0]:
                best = (key, j, r)
        (start, _), j, r = best
        pending.remove(j)
        if j["profile"] != "pod":
            i = cores.index(min(cores))
            cores[i] = start + j["seconds"]
            done[j["output"]] = cores[i]
            continue
        if pod is None or not levers["reuse"]:
            pod = new_pod(r)
            start = pod.free_at
        p = pod
        t = start
        if j["output"] not in prefetched:
            t_in = t + life.transfer_s(j["in_mb"])
            p.timeline.append(("transfer", t, t_in))
            t = t_in
        m = j["model"]
        if m in weights and m not in p.model_ready:  # downloaded before its first job, after the setup
            t0 = max(t, p.loaded_dl_end)
            p.model_ready[m] = t0 + life.download_s(weights[m])
            p.loaded_dl_end = p.model_ready[m]
            p.timeline.append(("download", t0, p.model_ready[m]))
        t = max(t, p.model_ready.get(m, t))
        t_job = t + seconds(j)
        p.timeline.append(("job", t, t_job))
        if levers["prefetch"]:  # the next pod job whose inputs exist moves them in now, under this job
            for k in pending:
                if k["profile"] == "pod" and all(n not in by_out or n in done for n in k["needs"]):
                    p.timeline.append(("transfer", t, t + life.transfer_s(k["in_mb"])))
                    prefetched.add(k["output"])
                    break
        t_out = t_job + life.transfer_s(j["out_mb"])
        p.timeline.append(("transfer", t_job, t_out))
        p.free_at = p.last_job_end = t_out
        done[j["output"]] = t_out
        if not levers["reuse"]:
            p.t_end = t_out + life.teardown_s
            p.timeline.append(("teardown", t_out, p.t_end))
            pod = None
    run_end = max(done.values())
    for p in pods:
        if p.t_end is None:
            wait = 0.0 if levers["asap"] else min(IDLE_TEARDOWN_S, run_end - p.last_job_end)
            p.t_end = p.last_job_end + wait + life.teardown_s
            p.timeline.append(("teardown", p.last_job_end + wait, p.t_end))
    total = {"billed_s": 0.0, "gpu_s": 0.0, "idle_s": dict.fromkeys(podbill.CAUSES, 0.0)}
    for p in pods:
        got = podbill.attribute(p.timeline, p.t_create, p.t_end)
        total["billed_s"] += got["billed_s"]
        total["gpu_s"] += got["gpu_s"]
        for c in podbill.CAUSES:
            total["idle_s"][c] += got["idle_s"][c]
    total["pods"] = len(pods)
    total["run_end_s"] = run_end
    return total


def _rows(jobs: list[dict]) -> list[tuple]:
    return [(j["output"], j["profile"], j["model"], j["needs"]) for j in jobs]


def variants() -> list[tuple[str, dict]]:
    off = dict.fromkeys(LEVERS, False)
    out = [("all levers off", off)]
    out += [(f"only {k}", {**off, k: True}) for k in LEVERS]
    out.append(("shipped executor", dict(SHIPPED)))
    on = dict.fromkeys(LEVERS, True)
    out.append(("all levers on", on))
    out += [(f"all on but {k}", {**on, k: False}) for k in LEVERS]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--probes", type=Path, nargs="+", default=[],
                    help="probe records that time the pod's jobs: directories (e.g. bench/results/sizing-h200-2026-12-01) "
                         "or single records, one a component; default: the plan's forecasts (models.yaml)")
    ap.add_argument("--orders", type=int, default=20, help="shuffled job orders to try (default 20)")
    ap.add_argument("--configfile", type=Path, nargs="*", default=[],
                    help="config files over the shipped config (e.g. a batch: generator.batch: 1)")
    args = ap.parse_args(argv)
    p = planned(args.probes, configfiles=args.configfile)
    for c in args.configfile:
        print(f"config over the shipped one, {c}: " + " ".join(Path(c).read_text().split()))
    if not p["ok"] or not p.get("pod_bill"):
        print("the plan refused a job or has no pod jobs:", p.get("refusals"), file=sys.stderr)
        return 2
    life = podbill.load_life()
    facts = load_facts(REPO / "config" / "models.yaml")
    jobs = p["jobs"]
    forecast = p["pod_bill"]
    weights = {m: podbill.weights_gb(facts, m) for m in forecast["weights_gb"]}
    fetch_order = podbill.fetch_order(_rows(jobs))
    # pod jobs first among equals, each kind by output: the plan's own order is Snakemake's set order, which moves
    # with the hash seed (the spread over shuffled orders below shows what that order is worth)
    jobs.sort(key=lambda j: (j["profile"] != "pod", j["output"]))
    pod_jobs = [j for j in jobs if j["profile"] == "pod"]
    first_gb = weights.get(next((j["model"] for j in pod_jobs if j["model"] in weights), ""), 0.0)
    print("job seconds: " + ("probe records in " + " ".join(map(str, args.probes)) if args.probes
                             else "the plan forecasts (models.yaml)"))
    for j in pod_jobs:
        print(f"  {j['rule']:12s} {j['output']:42s} {j['seconds']:8.1f} s  {j['seconds_source'][:110]}")
    print(f"plan: {len(pod_jobs)} pod jobs ({', '.join(sorted({j['rule'] for j in pod_jobs}))}), "
          f"{len(jobs) - len(pod_jobs)} desk jobs; pod GPU seconds {forecast['gpu_s']:.0f} (plan's job forecasts); "
          f"weights " + ", ".join(f"{m} {gb:.2f} GB" for m, gb in weights.items()) + f"; repo {forecast['repo_mb']:.1f} MB")
    print("pod life (config/pod_life.yaml): " + ", ".join(f"{k} {getattr(life, k):g}" for k in podbill.FIGURES))
    rows, records = [], []
    for name, levers in variants():
        got = simulate(jobs, life, weights, facts, forecast["repo_mb"], levers, fetch_order)
        floor = podbill.floor_s(life, first_gb, got["gpu_s"])
        floor_c = podbill.floor_container_s(life, first_gb, got["gpu_s"], forecast["repo_mb"])
        err = forecast["billed_s"] / got["billed_s"] - 1.0
        idle = got["idle_s"]
        rows.append((name, got["pods"], f"{got['billed_s']:.0f}", f"{got['gpu_s']:.0f}", f"{got['billed_s'] / got['gpu_s']:.3f}",
                     f"{floor:.0f}", f"{got['billed_s'] / floor:.3f}", f"{floor_c:.0f}", f"{got['billed_s'] / floor_c:.3f}",
                     f"{err * 100:+.1f}%",
                     f"${got['billed_s'] / 3600 * forecast['hourly_usd']:.2f}",
                     " ".join(f"{c}={idle[c]:.0f}" for c in podbill.CAUSES)))
        records.append({"variant": name, "levers": levers, **got, "floor_s": floor, "floor_container_s": floor_c,
                        "forecast_s": forecast["billed_s"], "forecast_error": err})
    print(format_table(("variant", "pods", "billed s", "GPU s", "billed/GPU", "floor s", "billed/floor",
                        "floor(ctr) s", "billed/floor(ctr)", "forecast err", "cost", "idle s by cause"), rows))
    shipped = next(r for r in records if r["variant"] == "shipped executor")
    print(f"\nforecast (fourloops plan --machine pod, fetch_at {forecast.get('fetch_at')}): {forecast['billed_s']:.0f} s; "
          "forecast err = forecast / simulated - 1 for every variant (the forecast models the shipped executor)")
    print(f"shipped executor: billed/floor {shipped['billed_s'] / shipped['floor_s']:.3f} (goal <= 1.10; "
          f"floor from the container's start {shipped['billed_s'] / shipped['floor_container_s']:.3f}), "
          f"forecast {forecast['billed_s']:.0f} s against simulated {shipped['billed_s']:.0f} s "
          f"({shipped['forecast_error'] * 100:+.1f}%, goal within 10%), billed/GPU-busy "
          f"{shipped['billed_s'] / shipped['gpu_s']:.3f}")
    base = next(r for r in records if r["variant"] == "all levers off")
    on = next(r for r in records if r["variant"] == "all levers on")
    print("what each lever buys (billed seconds saved): " + "; ".join(
        f"{k}: alone {base['billed_s'] - next(r for r in records if r['variant'] == f'only {k}')['billed_s']:.0f}, "
        f"last {next(r for r in records if r['variant'] == f'all on but {k}')['billed_s'] - on['billed_s']:.0f}"
        for k in LEVERS))
    # The plan's order of jobs is Snakemake's set order (it moves with the hash seed): the bill over shuffled
    # orders of the pod jobs, the download order following each (first use), with and without the pool's rank.
    spread = {}
    for name, base_name, first_use in (("shipped executor", "shipped executor", False),
                                       ("all on but ranked", "all on but ranked", False),
                                       ("shipped, downloads in first-use order", "shipped executor", True)):
        levers = next(r["levers"] for r in records if r["variant"] == base_name)
        got = []
        for seed in range(args.orders):
            pods_ = sorted((j for j in jobs if j["profile"] == "pod"), key=lambda j: j["output"])  # then shuffled
            desk = [j for j in jobs if j["profile"] != "pod"]
            random.Random(seed).shuffle(pods_)
            order_ = (list(dict.fromkeys(j["model"] for j in pods_ if j["model"] in weights)) if first_use
                      else podbill.fetch_order(_rows(pods_ + desk)))
            got.append(simulate(pods_ + desk, life, weights, facts, forecast["repo_mb"], levers, order_)["billed_s"])
        spread[name] = {"min": min(got), "median": statistics.median(got), "max": max(got)}
        floor = next(r["floor_s"] for r in records if r["variant"] == base_name)
        print(f"{name} over {args.orders} shuffled job orders: billed s min {min(got):.0f}, median "
              f"{statistics.median(got):.0f}, max {max(got):.0f} (billed/floor max {max(got) / floor:.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps({"forecast": forecast, "life": {k: getattr(life, k) for k in podbill.FIGURES},
                                               "variants": records, "orders": spread}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
