"""`fourloops plan` on a fresh, a fully built and a param-changed workflow: the right jobs, the right reasons."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import COMMIT, REPO, pinned, snakemake_env

FOURLOOPS = str(Path(sys.executable).with_name("fourloops"))


def plan_proc(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [FOURLOOPS, "plan", "--json", "--profile", str(REPO / "profiles" / "smoke"), "--directory", str(workdir), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=snakemake_env(), cwd=workdir, timeout=300)


def plan(workdir: Path, *args: str) -> dict:
    proc = plan_proc(workdir, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_fresh_workflow_plans_every_stage_because_outputs_are_missing(tmp_path):
    p = plan(tmp_path, "results/ladder.csv")
    rules = sorted({j["rule"] for j in p["jobs"]})
    assert rules == ["fit", "generate", "keypoints", "keypoints_generated", "ladder", "lora_embeddings",
                     "lora_records", "lora_train", "render", "smoke_detector", "smoke_generator"]
    assert len(p["jobs"]) == 22
    for j in p["jobs"]:
        assert "output files have to be generated" in j["why"], j
        assert j["verdict"] == "fits" and j["seconds"] >= 0
    # no executor rents a pod here: the pod-tagged jobs run on the desk, at its price (none)
    assert set(p["totals"]) == {"desk"} and p["totals"]["desk"]["jobs"] == 22
    assert {j["machine"] for j in p["jobs"]} == {"desk"} and not any(j["cost_usd"] for j in p["jobs"])
    assert p["ok"]


def test_built_workflow_has_nothing_to_plan_but_what_it_is_told_to_run_again(built_copy):
    assert plan(built_copy, "results/ladder.csv")["jobs"] == []
    # a forced rerun, as snakemake --forcerun: those jobs and what depends on them, each timed by its own last run
    p = plan(built_copy, "--forcerun", "generate", "--", "results/ladder.csv")
    got = sorted({j["rule"] for j in p["jobs"]})
    assert got == ["fit", "generate", "keypoints_generated", "ladder"], got
    gen = [j for j in p["jobs"] if j["rule"] == "generate"]
    assert len(gen) == 4 and all("forced" in j["why"].lower() for j in gen), gen
    assert all(j["seconds_source"].startswith("benchmark history") for j in gen), gen


def test_changed_param_plans_only_what_depends_on_it(built_copy):
    p = plan(built_copy, "--config", "model_set=smoke", "seed=1", "--", "results/ladder.csv")
    got = {(j["rule"], json.dumps(j["wildcards"], sort_keys=True)) for j in p["jobs"]}
    assert {r for r, _ in got} == {"generate", "keypoints_generated", "fit", "ladder"}
    for j in p["jobs"]:
        if j["rule"] == "generate":
            assert "params have changed" in j["why"], j
        else:
            assert "updated by another job" in j["why"], j
    assert not any(j["rule"] == "fit" and j["wildcards"].get("source") in ("floor", "floor_gt") for j in p["jobs"])
    # the pod's jobs now have benchmark history from the smoke run
    assert all(j["seconds_source"].startswith("benchmark history") for j in p["jobs"] if j["rule"] == "generate")


def test_a_job_whose_bytes_follow_its_batch_runs_again_at_another_batch(built_copy):
    """Batched detector calls round differently, so keypoints jobs asked for 2 images a call plan again, with what
    reads them, and nothing upstream; the plan prints the batch they would run at."""
    (built_copy / "batch2.yaml").write_text("keypoints:\n  batch: 2\n")
    p = plan(built_copy, "--configfile", str(built_copy / "batch2.yaml"), "--", "results/ladder.csv")
    got = {j["rule"] for j in p["jobs"]}
    assert "keypoints_generated" in got and "generate" not in got and "render" not in got, got
    kp = [j for j in p["jobs"] if j["rule"] == "keypoints_generated"]
    assert all(j["batch"] == 2 for j in kp), kp


def test_plan_on_the_pod_prices_pod_jobs(tmp_path):
    real = ("--machine", "pod", "--config", "model_set=real")
    proc = plan_proc(tmp_path, *real, "--", "results/ladder.csv")  # the shipped config pins no generator commit
    unpinned = json.loads(proc.stdout)
    assert proc.returncode == 2 and unpinned["ok"], proc.stderr[-3000:]  # every wall fits; the config does not
    assert unpinned["config_problems"] == [
        "config generator.revision is not set (rule generate): pin the hub commit of OmniGen2/OmniGen2 "
        "(`hf download OmniGen2/OmniGen2` prints the snapshot path; its last part is the commit)"]
    # the pod's own probe times its jobs (the desk's, 10x slower, times nothing on the pod)
    for machine, seconds in (("pod", 7.0), ("desk", 70.0)):
        probe = tmp_path / "results" / "probe" / machine / "generator.json"
        probe.parent.mkdir(parents=True)
        probe.write_text(json.dumps({
            "key": "generator/omnigen2/bf16/512", "peak_vram_gib": 15.4, "machine_name": machine,
            "gpu_name": "NVIDIA H200", "load_seconds": 17.0,
            "configurations": [{"references": n, "seconds_per_item": seconds} for n in (1, 2, 3)]}))
    p = plan(tmp_path, *real, "--configfile", pinned(tmp_path), "--", "results/ladder.csv")
    assert p["config_problems"] == []
    gen = [j for j in p["jobs"] if j["rule"] == "generate"]
    assert len(gen) == 4 and all(j["cost_usd"] > 0 and j["machine"] == "pod" for j in gen)
    assert all(j["seconds_source"].startswith("measured: probe on pod") for j in gen), gen[0]["seconds_source"]
    # the RunPod run from this machine: only its pod jobs go to the pod and are priced; the rest run here
    assert {j["machine"] for j in p["jobs"] if j["rule"] != "generate"} == {"desk"}
    assert not any(j["cost_usd"] for j in p["jobs"] if j["rule"] != "generate")
    assert p["totals"]["pod (rented)"]["cost_usd"] > 0 and p["totals"]["pod (rented)"]["jobs"] == 4
    assert (p["machine"], p["executor"]) == ("desk", "runpod")  # the run profiles/pod makes, whatever the profile
    # the whole bill: the pod's fixed costs (config/pod_life.yaml) and transfers on top of the jobs' seconds
    bill = p["pod_bill"]
    assert bill["gpu_s"] == p["totals"]["pod (rented)"]["seconds"]
    assert bill["idle_s"]["pull"] > 0 and bill["idle_s"]["setup"] > 0 and bill["idle_s"]["teardown"] > 0
    # each figure is rounded to 0.1 s on its own, so their sum may differ from the rounded bill by that much each
    assert bill["billed_s"] == pytest.approx(bill["gpu_s"] + sum(bill["idle_s"].values()), abs=0.05 * 8)
    assert bill["billed_s"] > bill["floor_s"] > bill["gpu_s"]
    assert bill["cost_usd"] > p["totals"]["pod (rented)"]["cost_usd"] and set(bill["order"]) == {j["output"] for j in gen}
    # the generator as a directory of this machine, its hub commit left in the config: the loader refuses the
    # revision, and a pod has none of this machine's files; the plan names both, as a run would before any pod
    local = tmp_path / "omnigen2"
    (tmp_path / "local.yaml").write_text(f"generator:\n  model: {local}\n")
    proc = plan_proc(tmp_path, *real, "--configfile", pinned(tmp_path), str(tmp_path / "local.yaml"), "--",
                     "results/ladder.csv")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert [line.split(" (rule ")[0] for line in json.loads(proc.stdout)["config_problems"]] == [
        f"config generator.revision = '{COMMIT}' was given for the local directory {local}",
        f"config generator.model = '{local}' is a directory on this machine"], proc.stdout[-3000:]


def test_auto_batches_fill_the_card_of_the_machine_a_job_is_placed_on(tmp_path):
    """`auto` takes the largest batch whose ask fits the job's card (and what the run's Snakemake provides), so no
    ask passes the card and a bigger card never gets a smaller batch; a number is taken as asked; the plan prints the
    batch each job runs at."""
    (tmp_path / "batch.yaml").write_text("keypoints:\n  batch: 3\nlora:\n  micro_batch: auto\n")
    args = ("--config", "model_set=real", "--configfile", pinned(tmp_path), str(tmp_path / "batch.yaml"), "--",
            "results/ladder.csv")
    jobs = {m: {(j["rule"], j["output"]): j for j in plan(tmp_path, "--machine", m, *args)["jobs"]}
            for m in ("desk", "pod")}
    card = {"desk": 24.0, "pod": 48.0}  # config/machines.yaml's cards (GiB)
    for machine, placed in jobs.items():
        gen = [j for (rule, _), j in placed.items() if rule == "generate"]
        assert gen and all(1 < j["batch"] <= 8 and j["vram_gib"] <= card[machine] for j in gen), gen
        lora = [j for (rule, _), j in placed.items() if rule == "lora_train"]
        assert lora and 1 < lora[0]["batch"] <= 8 and lora[0]["vram_gib"] <= card[machine]
        kp = [j for (rule, _), j in placed.items() if rule == "keypoints_generated"]
        assert kp and {j["batch"] for j in kp} == {3}
    for key, job in jobs["desk"].items():  # the pod's card holds at least the desk's batch of every job
        if job["rule"] in ("generate", "lora_train"):
            assert jobs["pod"][key]["batch"] >= job["batch"], key


def test_an_auto_grades_batch_fills_the_card_of_the_machine_the_grades_job_is_placed_on(tmp_path):
    """grades.batch auto: the largest batch of the job's views whose ask fits its card, the card and not the view
    count stopping it on the desk for bf16 at 1024 px (each further view adds its grading prompt's activations); the
    pod holds at least the desk's batch; the plan gives the batch each job runs at."""
    (tmp_path / "batch.yaml").write_text(
        "render:\n  image_size: 1024\n"
        "restyle:\n  styles: {ink: 'Redraw this image as a black ink drawing.'}\n"
        "  azimuths: [0, 45, 90, 135, 180, 225, 270, 315]\n"
        f"grades:\n  precision: bf16\n  batch: auto\n  scorer_revision: {COMMIT}\n  adapter_revision: {COMMIT}\n")
    args = ("--config", "model_set=real", "--configfile", pinned(tmp_path), str(tmp_path / "batch.yaml"), "--",
            "results/grades/ink.csv")
    grades = {m: [j for j in plan(tmp_path, "--machine", m, *args)["jobs"] if j["rule"] == "grades"]
              for m in ("desk", "pod")}
    card = {"desk": 24.0, "pod": 48.0}  # config/machines.yaml's cards (GiB)
    for machine, (job,) in grades.items():
        assert 1 < job["batch"] <= 8 and job["vram_gib"] <= card[machine], job
        assert "grades.batch = auto" in job["vram_source"], job
    assert grades["desk"][0]["batch"] < 8 and grades["pod"][0]["batch"] >= grades["desk"][0]["batch"]


def test_a_plan_places_each_job_as_the_profiles_executor_would(tmp_path):
    """The dry-run runs under Snakemake's own `dryrun` executor; the plan judges and prices each job where the
    profile's executor would run it: the seeds' LoRA setup (27 GiB) on the pod under profiles/pod, each job on its
    partition under profiles/slurm."""
    seeds = tmp_path / "seeds-lora.yaml"
    seeds.write_text("lora: {frozen_dtype: fp32, text_encoder: resident, profile: pod}\n")

    def run(profile: str, *extra: str, targets=("results/lora/camera.safetensors",)) -> subprocess.CompletedProcess:
        return subprocess.run(
            [FOURLOOPS, "plan", "--json", "--workflow-profile", str(REPO / "profiles" / profile), "--directory",
             str(tmp_path), "--configfile", pinned(tmp_path), str(seeds), *extra, "--", *targets],
            capture_output=True, text=True, env=snakemake_env(), cwd=tmp_path, timeout=300)

    proc = run("pod")
    assert proc.returncode == 0, proc.stderr[-3000:]
    p = json.loads(proc.stdout)
    where = {j["rule"]: (j["machine"], j["verdict"], j["cost_usd"] > 0) for j in p["jobs"]}
    assert where == {"lora_records": ("desk", "fits", False), "lora_embeddings": ("desk", "fits", False),
                     "lora_train": ("pod", "fits", True)}, where
    assert p["executor"] == "runpod" and p["pod_bill"]["order"] == ["results/lora/camera.safetensors"]
    proc = run("default")  # the desk alone: the same job is refused there
    assert proc.returncode == 2 and "rule lora_train, 1 job(s)" in json.loads(proc.stdout)["refusals"], proc.stdout
    # a job refused on the pod is named as refused there, not on the desk the run starts from
    big = tmp_path / "big.yaml"
    big.write_text("lora: {resolution: 2048}\n")
    proc = run("pod", str(big))
    assert proc.returncode == 2 and json.loads(proc.stdout)["refusals"].startswith(
        "walls: 1 job(s) cannot run on pod: "), proc.stdout[-3000:]
    # the DFC's compile runs in the container on the pod (container.host: pod): priced and in the pod's bill
    proc = run("pod", targets=("results/hef/rfdetr-keypoint.hef",))
    p = json.loads(proc.stdout)
    (compile_,) = [j for j in p["jobs"] if j["rule"] == "hef_compile"]
    assert compile_["machine"] == "container on pod" and compile_["rented"] and compile_["cost_usd"] > 0, compile_
    assert p["pod_bill"]["order"] == ["results/hef/rfdetr-keypoint.hef"], p["pod_bill"]
    # ... after the DFC venv's set-up on the pod (no hef.dfc_wheel in this config: its upload unknown, said so)
    venv = p["pod_bill"]["dfc_venv"]
    assert venv["build_s"] > 0 and venv["calls"] == {"ssh": 4, "rsync": 1} and not venv["upload_known"], venv
    proc = run("slurm", "--machine", "desk")  # the SLURM run from the desk: each job on its partition
    assert proc.returncode == 0, proc.stderr[-3000:]
    p = json.loads(proc.stdout)
    assert p["executor"] == "slurm" and p["machine"] == "cluster" and not p["pod_bill"]
    assert {j["rule"]: j["partition"] for j in p["jobs"]}["lora_train"].startswith("partition "), p["jobs"]


def test_a_plan_with_a_refused_job_exits_2_and_names_the_wall(tmp_path):
    fp32 = tmp_path / "fp32.yaml"  # the seeds' configuration: the frozen generator in fp32 (29.79 GiB asked)
    fp32.write_text("generator:\n  precision: fp32\n")
    proc = plan_proc(tmp_path, "--machine", "desk", "--config", "model_set=real", "--configfile", str(fp32), "--",
                     "results/ladder.csv")
    assert proc.returncode == 2, proc.stderr[-3000:]
    p = json.loads(proc.stdout)
    refused = [j for j in p["jobs"] if j["verdict"].startswith("REFUSED")]
    assert {j["rule"] for j in refused} == {"generate"} and len(refused) == 4
    assert "video memory" in refused[0]["verdict"] and not p["ok"]
    # the refusal names every one of them, grouped by what they ask (1, 2 and 3 references ask apart)
    groups = re.findall(r"^rule generate, (\d+) job\(s\)", p["refusals"], re.M)
    assert sum(int(n) for n in groups) == 4 and len(groups) == 3, p["refusals"][:3000]


def test_a_plan_on_a_locked_directory_says_it_is_locked(tmp_path):
    """A Snakemake killed mid-run leaves its lock; the plan says so and how to unlock, instead of 'nothing to do'."""
    import signal
    import time

    from conftest import SNAKEMAKE

    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--profile", str(REPO / "profiles" / "smoke"),
           "--directory", str(tmp_path), "results/ladder.csv"]
    run = subprocess.Popen(cmd, cwd=tmp_path, env=snakemake_env(), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    locks = tmp_path / ".snakemake" / "locks"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (locks.is_dir() and any(locks.iterdir())):
        time.sleep(0.2)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    assert any(locks.iterdir()), "the run never took its lock"
    proc = plan_proc(tmp_path, "results/ladder.csv")
    assert proc.returncode == 3, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "locked" in proc.stderr and "snakemake --unlock" in proc.stderr
    assert json.loads(proc.stdout)["locked"] is True  # the plan itself is still shown


def test_a_plan_on_the_cluster_names_the_partition_of_each_job(tmp_path):
    """machines.yaml's example cluster: CPU jobs go to its default partition, a generator that needs a card to the
    smallest GPU partition whose walls fit it."""
    p = plan(tmp_path, "--machine", "cluster", "--config", "model_set=real", "--configfile", pinned(tmp_path), "--",
             "results/ladder.csv")
    parts = {j["rule"]: j["partition"] for j in p["jobs"]}
    gen = [j for j in p["jobs"] if j["rule"] == "generate"]
    assert parts["render"] == "partition cpu" and parts["fit"] == "partition cpu", parts
    assert {j["partition"] for j in gen} == {"partition rtx4090"} and all(j["verdict"] == "fits" for j in gen), gen
    assert p["ok"] and p["machine"] == "cluster"


def test_the_plan_says_which_forecasts_take_their_warm_up_from_a_probe_that_compiled_and_how_to_measure_a_fresh_one():
    from fourloops import plan as planmod

    def job(rule, source):
        return {"rule": rule, "output": f"results/{rule}", "profile": "desk", "verdict": "fits", "seconds": 40.0,
                "seconds_source": source, "cost_usd": 0.0, "why": "missing output"}

    probe = "measured: probe on desk (NVIDIA GeForce RTX 3090), results/probe/desk/generator.json: load 9 s + warm-up"
    jobs = [job("generate", f"{probe} 0.001 s (smallest over configurations) + 2 views x 7 s"),
            job("generate", f"{probe} 0.001 s (smallest over configurations) + 2 views x 7 s"),
            job("lora_train", f"{probe} 14.4 s (its one configuration's, with one-off kernel compilation: high)"),
            job("keypoints", f"{probe} 0.7 s (first configuration's, no kernel compiled) + 2 images x 0.04 s"),
            job("fit", "estimate: models.yaml seconds")]
    text = planmod.format_plan({"machine": "desk", "jobs": jobs, "pod_bill": None, "refusals": "",
                                "totals": {"desk": {"jobs": 5, "seconds": 200.0, "cost_usd": 0.0}}})
    (line,) = [x for x in text.splitlines() if x.startswith("warm-up:")]
    assert line.startswith("warm-up: the forecasts of generate (2 jobs), lora_train (1 job) take it from a probe"), line
    assert "`snakemake probe --forcerun probe_model`" in line
    fresh = [j for j in jobs if j["rule"] in ("keypoints", "fit")]
    text = planmod.format_plan({"machine": "desk", "jobs": fresh, "pod_bill": None, "refusals": "",
                                "totals": {"desk": {"jobs": 2, "seconds": 80.0, "cost_usd": 0.0}}})
    assert "warm-up:" not in text


def test_plan_of_the_publication_gate_says_it_runs_and_what_it_would_refuse(tmp_path):
    """`publish` has no files (always run, never built): the plan lists its job where it runs and the gate's own
    judgement of publish.artifacts as the files are now, as `snakemake publish` would refuse them."""
    p = plan(tmp_path, "publish")
    assert [(j["rule"], j["machine"], j["verdict"], j["why"]) for j in p["jobs"]] == [
        ("publish", "desk", "fits", "neither input nor output")]
    assert p["totals"] == {"desk": {"jobs": 1, "seconds": p["jobs"][0]["seconds"], "cost_usd": 0.0}}
    gate = p["gate"]
    assert gate["artifacts"] == [{"path": "results/ladder.csv", "kind": "corpus", "exists": False},
                                 {"path": "results/ladder.png", "kind": "report", "exists": False}]
    missing = [(r["artifact"], r["rule"], r["evidence"]) for r in gate["refusals"] if r["rule"] == 5]
    assert missing == [("results/ladder.csv", 5, "the file does not exist"),
                       ("results/ladder.png", 5, "the file does not exist")]
    assert plan(tmp_path, "results/render/az000.png")["gate"] is None  # no gate in that run


def test_the_runs_own_wall_check_sees_the_publication_gate_as_the_plan_does():
    """The gate's job has no files (a script): the plan checked and placed it, but the real run's check
    (Admission.pending, onstart) skipped every job without outputs, the gate's with the target rules'. Now one pending
    list serves both; the target rules (no work of their own) stay out, and under SLURM the gate, a local rule, is
    judged on the submitting machine."""
    from types import SimpleNamespace

    from fourloops import machines, slurm
    from fourloops.admission import Admission
    from fourloops.asks import Ask
    from fourloops.placement import Placement

    def job(rule, *output, norun=False):
        return SimpleNamespace(rule=SimpleNamespace(name=rule, output=list(output), norun=norun), output=list(output),
                               wildcards={})

    dag = SimpleNamespace(needrun_jobs=lambda: [job("publish"), job("all", norun=True),
                                                job("render", "results/render/az000.png")])
    table = machines.load(REPO / "config" / "machines.yaml")
    # the real placement and checks; the rules' own profile, ask and params stand in
    placement = Placement(SimpleNamespace(_localrules={"publish"}, executor_plugin=None), {"machine": "desk"}, table,
                          facts={}, measured=None, params=lambda rule, wc: {"rule": rule})
    placement.profile, placement.ask = (lambda rule, wc: "desk"), (lambda rule, wc: Ask.of(0.0, 1.0))
    placement.context_for = lambda rule, wc: None
    pending = Admission(placement, placement.params, records=None, global_resources=dict).pending(dag)
    assert [(j.rule, j.output, j.local, j.params) for j in pending] == [
        ("publish", "publish", True, {"rule": "publish"}),
        ("render", "results/render/az000.png", False, {"rule": "render"})]
    placed = slurm.place(pending, table, "cluster")
    assert placed.where == {"publish": "here (desk)", "results/render/az000.png": "partition cpu"}
    assert placed.local_rules == {"publish"}
    # the plugin's resources each job is given agree: the local rule asks no partition (slurm.runs_here for both)
    placement.planned_executor, placement.slurm_cluster = "slurm", (lambda: "cluster")
    assert placement.slurm_request("publish", {}) is None
    assert placement.slurm_request("render", {}) == {"slurm_partition": "cpu"}


def test_the_runs_local_checks_take_the_publication_gates_job_as_its_wall_check_does(tmp_path, monkeypatch):
    """The disk-space and preflight checks before a run (Admission.local_jobs) skipped every job without outputs, so
    the gate's job, which the wall check judges (pending), was never checked for room for its log under
    logs/publish/. Now both take the jobs with work of their own: a gate whose last log took more than the disk has
    is named before any job; target rules (all) stay out, a rented pod's job meets its needs on the pod, and under
    SLURM the gate, a local rule, stays on this machine while a partition job meets its needs on the node."""
    from types import SimpleNamespace

    from fourloops import machines
    from fourloops.admission import Admission
    from fourloops.asks import Ask
    from fourloops.placement import Placement

    def job(rule, *output, log=(), norun=False):
        return SimpleNamespace(rule=SimpleNamespace(name=rule, output=list(output), norun=norun), output=list(output),
                               log=list(log), benchmark=None, wildcards={})

    gate = job("publish", log=["logs/publish/publish.log"])
    render, generate = job("render", "results/render/az000.png"), job("generate", "results/generate/A/az000.png")
    dag = SimpleNamespace(needrun_jobs=lambda: [gate, job("all", norun=True), render, generate])
    huge = {"path": "logs/publish/publish.log", "bytes": 2**60}  # what its record says the gate's log took last time

    def checks(executor):
        """The real placement and checks under `executor`; the rules' own profile, ask and params stand in."""
        placement = Placement(SimpleNamespace(_localrules={"publish"}, executor_plugin=None), {"machine": "desk"},
                              machines.load(REPO / "config" / "machines.yaml"), facts={}, measured=None,
                              params=lambda rule, wc: {})
        placement.planned_executor = executor
        placement.profile = lambda rule, wc: "pod" if rule == "generate" else "desk"
        placement.ask, placement.context_for = (lambda rule, wc: Ask.of(0.0, 1.0)), (lambda rule, wc: None)
        records = SimpleNamespace(records=[SimpleNamespace(entries=lambda kind: [huge])])
        return Admission(placement, placement.params, records, global_resources=dict)

    assert checks("runpod").local_jobs(dag) == [gate, render]
    assert checks("slurm").local_jobs(dag) == [gate]
    monkeypatch.chdir(tmp_path)
    (problem,) = checks(None).space_problems(dag)
    assert problem.startswith(".: no room:") and "took 1073741824.0 GiB last time" in problem, problem


# One parse of the workflow by Snakemake's API (no DAG: the report's plan walks the rules), then the report's plan
# page's params (fourloops.plan.planned) under each executor a run may use, as JSON on the last line.
_PLANNED = '''
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
from fourloops.plan import planned
from fourloops.smk import workflow_of
repo, workdir, machine, *executors = sys.argv[1:]
with SnakemakeApi(OutputSettings()) as api:
    wf = api.workflow(resource_settings=ResourceSettings(), config_settings=ConfigSettings(config={"machine": machine}),
                      snakefile=Path(repo) / "Snakefile", workdir=Path(workdir))._workflow
    view, out = workflow_of(wf), {}
    for executor in executors:
        view.placement.planned_executor = None if executor == "local" else executor
        out[executor] = planned(view, ["results/ladder.csv", "results/ladder.png"])
    out["_local_rules"] = sorted(view.placement.local_rules())
    print(json.dumps(out))
'''

DESK = "desk: NVIDIA GeForce RTX 3090 24 GiB"
CPU, RTX4090 = "cluster/cpu: no GPU", "cluster/rtx4090: NVIDIA GeForce RTX 4090 24 GiB"
GPU_RULES = {"generate", "keypoints", "keypoints_generated", "lora_embeddings", "lora_train"}
CPU_RULES = {"render", "fit", "lora_records", "ladder"}


def report_plans(workdir: Path, machine: str, *executors: str) -> dict[str, dict]:
    proc = subprocess.run([sys.executable, "-c", _PLANNED, str(REPO), str(workdir), machine, *executors],
                          capture_output=True, text=True, env=snakemake_env(), cwd=workdir, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def on(p: dict) -> dict[str, set[str]]:
    """Rule -> the machines its jobs are judged on in a report plan."""
    out: dict[str, set[str]] = {}
    for j in p["jobs"]:
        out.setdefault(j["rule"], set()).add(j["machine"])
    return out


def test_the_reports_plan_page_places_each_job_as_the_runs_own_check(tmp_path):
    """The report's plan page (rule run_plan's params, fourloops.plan.planned) judged every job on config machine
    whatever the executor: under profiles/slurm (executor slurm, config machine desk) every job on the desk, though
    the run sends each to a partition of the cluster. It now places and asks each job through the run's own check
    (Admission.pending_job, check). The default desk run's value is unchanged, byte for byte (a params change would
    rerun the page): every job on the desk, checked against it."""
    plans = report_plans(tmp_path, "desk", "local", "slurm")
    desk = plans["local"]
    assert desk["target"] == DESK and desk["ok"] and set(on(desk)) == GPU_RULES | CPU_RULES
    assert all(j["machine"] == DESK and j["hourly_usd"] == 0.0 and j["verdict"] == "fits" for j in desk["jobs"])
    assert list(desk) == ["target", "ok", "jobs"] and list(desk["jobs"][0]) == [
        "rule", "output", "profile", "machine", "hourly_usd", "walls", "verdict", "forecast_seconds",
        "forecast_source", "benchmark"]  # the shape fourloops.pages.plan_page reads
    slurm = plans["slurm"]  # as `fourloops plan --workflow-profile profiles/slurm`: the cluster's partitions
    assert slurm["target"] == "cluster cluster (partitions cpu, rtx4090, a100)" and slurm["ok"]
    assert on(slurm) == {**{r: {RTX4090} for r in GPU_RULES}, **{r: {CPU} for r in CPU_RULES}}, on(slurm)
    # the page is made where these params are: by the submitting Snakemake, a local rule (on a SLURM node a job's own
    # Snakemake evaluates params again under the slurm-jobstep executor, which would judge every job on the desk)
    assert "run_plan" in plans["_local_rules"], plans["_local_rules"]


def test_the_reports_plan_page_with_a_cluster_as_config_machine_places_as_the_run_does(tmp_path):
    """Config machine cluster: the page judged every job on the cluster taken as one machine (its largest card, the
    a100), not on the partition the run sends it to; under the RunPod executor, which submits nothing to SLURM, on
    that a100 too, where the run starts them on the cluster's submit_host (the desk) and rents a pod for generate,
    which the page now tells from the jobs started here (asked as rented: Placement.context_for)."""
    plans = report_plans(tmp_path, "cluster", "local", "runpod")
    assert plans["local"]["target"] == "cluster cluster (partitions cpu, rtx4090, a100)"
    assert on(plans["local"]) == {**{r: {RTX4090} for r in GPU_RULES}, **{r: {CPU} for r in CPU_RULES}}
    pod = plans["runpod"]
    assert pod["target"] == DESK and on(pod) == {**{r: {DESK} for r in (GPU_RULES | CPU_RULES) - {"generate"}},
                                                 "generate": {"pod: NVIDIA A40 46 GiB (rented)"}}, on(pod)


def test_an_invalid_config_value_plans_nothing_with_exit_2_naming_key_value_and_allowed(tmp_path):
    """As the plan's own checks of --configfile and --machine (exit 2, `nothing was planned`): the workflow's
    refusal of a --config value was Snakemake's exit 1 with its log and traceback line around it."""
    proc = plan_proc(tmp_path, "--config", "machine=nowhere", "--", "results/render/az000.png")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        "fourloops plan: nothing was planned:",
        "  --config: machine = 'nowhere': not a machine of config/machines.yaml; allowed: one of ['desk', 'pod', "
        "'h200', 'h200_pair', 'cluster']"]
    # the workflow's other refusals while it is read (a model set this directory does not hold), the same way
    (tmp_path / ".fourloops-model-set").write_text("smoke\n")
    proc = plan_proc(tmp_path, "--config", "model_set=real", "--", "results/render/az000.png")
    assert proc.returncode == 2 and proc.stderr.startswith(
        "fourloops plan: nothing was planned:\n  model_set = 'real', but this working directory"), proc.stderr[-3000:]
    assert "allowed: 'smoke' here" in proc.stderr and "File " not in proc.stderr
    # a --config entry Snakemake refuses with a traceback (a dotted key), before Snakemake runs
    proc = plan_proc(tmp_path, "--config", "lora.rank=4", "--", "results/render/az000.png")
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        "fourloops plan: nothing was planned:",
        "  --config 'lora.rank=4': not KEY=VALUE with KEY a top-level config key; allowed: e.g. seed=3; a nested key "
        "(render.image_size) goes in a --configfile"]
    # a target after --config without -- is taken for a config entry: the words say so
    proc = plan_proc(tmp_path, "--config", "seed=3", "results/render/az000.png")
    assert proc.returncode == 2 and "--config 'results/render/az000.png': not KEY=VALUE" in proc.stderr
    assert "end it with -- before the targets" in proc.stderr


def test_a_runpod_run_with_a_cluster_as_config_machine_rents_pods_and_runs_the_rest_here(tmp_path):
    """The RunPod executor submits nothing to SLURM: its pod jobs go to a rented pod (judged and priced there, in
    the pod's bill), the rest are local rules on this machine, the desk, as a SLURM run's local rules. The plan
    put every job on the cluster's cpu partition, the pod's generate jobs included, unpriced and with no bill."""
    p = plan(tmp_path, "--machine", "pod", "--config", "model_set=smoke", "machine=cluster", "--",
             "results/generate/A/az000.png")
    where = {(j["rule"], j["machine"], j["partition"], j["rented"]) for j in p["jobs"]}
    assert where == {("generate", "pod", "", True), ("render", "desk", "", False),
                     ("smoke_generator", "desk", "", False)}, where
    assert p["machine"] == "desk" and p["executor"] == "runpod" and set(p["totals"]) == {"desk", "pod (rented)"}
    gen = next(j for j in p["jobs"] if j["rule"] == "generate")
    assert gen["cost_usd"] > 0 and p["pod_bill"]["order"] == [gen["output"]]


def test_under_the_runpod_executor_the_jobs_started_here_are_asked_under_the_users_own_allocator(tmp_path):
    """The desk's jobs of a RunPod run are started by this Snakemake, whose environment holds the user's torch
    allocator variable (it stands over the machine's, rules/common.smk): they ask what they ask without the
    executor; only the pod's jobs take the pod's. Under the RunPod executor the desk's were asked under the desk's
    default allocator."""
    env = snakemake_env(PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    env.pop("FOURLOOPS_ALLOC_CONF_FROM", None)

    def vram(*args: str) -> dict:
        cmd = [FOURLOOPS, "plan", "--json", "--profile", str(REPO / "profiles" / "smoke"), "--directory",
               str(tmp_path), *args, "--config", "model_set=real", "--", "results/ladder.csv"]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        return {(j["rule"], j["machine"]): j["vram_gib"] for j in json.loads(proc.stdout)["jobs"]}

    here, pod = vram(), vram("--machine", "pod")
    desk = {rule: v for (rule, machine), v in here.items() if rule != "generate"}
    assert {rule: v for (rule, machine), v in pod.items() if machine == "desk"} == desk
    assert any(v for v in desk.values())  # GPU jobs among them: the allocator changes their asks
    assert pod[("generate", "pod")] != here[("generate", "desk")]  # the pod's own allocator, not the user's


def test_the_jobs_a_runpod_run_starts_here_take_this_machines_allocator_and_guard_not_the_clusters():
    """rules/common.smk sets the jobs' allocator from config machine before the executor is known; a RunPod run whose
    config machine is a cluster runs its local rules here (the desk), where the walls judged them: before its first
    job it points them at this machine (its busy-card limit and allocator), and a user's own allocator stands."""
    from types import SimpleNamespace

    from fourloops import card, machines
    from fourloops.placement import Placement

    table = machines.load(REPO / "config" / "machines.yaml")
    table["desk"]["cuda_allocator"] = "expandable_segments"  # a desk that asks for it (its comment invites that)
    view = SimpleNamespace(config={"machine": "cluster"}, machines=table, here=lambda: "desk")
    environ = {}
    Placement.point_jobs_here(view, environ)
    assert environ == {card.MACHINE_ENV: "desk", card.ALLOC_VAR: "expandable_segments:True", card.SET_BY: "desk"}
    own = {card.ALLOC_VAR: "expandable_segments:False"}
    Placement.point_jobs_here(view, own)
    assert own == {card.MACHINE_ENV: "desk", card.ALLOC_VAR: "expandable_segments:False"}
    # the jobs run where config machine says (a desk run, or SLURM's partitions): nothing moves
    untouched = {}
    Placement.point_jobs_here(SimpleNamespace(config={"machine": "desk"}, machines=table, here=lambda: "desk"),
                                 untouched)
    assert untouched == {}


def test_a_runpod_run_on_a_pod_tells_the_jobs_it_rents_a_pod_for_from_those_it_starts_itself(tmp_path):
    """Config machine pod under the RunPod executor: Snakemake runs on a pod and rents more for the pod jobs, one
    machine name for both. The ask context was one per name, so the jobs started on the pod itself took the pod's
    allocator, not the user's own variable, and the plan totalled both under "pod". Now the jobs this Snakemake
    starts take the user's variable, the rented ones the pod's (the executor sets it there), and the rented pod has
    its own total, which the pod bill's GPU-busy is."""

    def plan_on_pod(**env: str) -> dict:
        environ = snakemake_env(**env)
        environ.pop("FOURLOOPS_ALLOC_CONF_FROM", None)
        if not env:
            environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        cmd = [FOURLOOPS, "plan", "--json", "--workflow-profile", str(REPO / "profiles" / "pod"), "--directory",
               str(tmp_path), "--configfile", pinned(tmp_path), "--config", "machine=pod", "model_set=real", "--",
               "results/ladder.csv"]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=environ, cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout)

    plain, own = plan_on_pod(), plan_on_pod(PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    for p in (plain, own):
        assert (p["machine"], p["executor"], set(p["totals"])) == ("pod", "runpod", {"pod", "pod (rented)"})
        assert {(j["machine"], j["rented"]) for j in p["jobs"]} == {("pod", False), ("pod", True)}
        assert p["totals"]["pod (rented)"]["jobs"] == 4 and p["pod_bill"]["gpu_s"] == p["totals"]["pod (rented)"]["seconds"]

    def vram(p: dict, rented: bool) -> dict:
        return {j["output"]: j["vram_gib"] for j in p["jobs"] if j["rented"] == rented and j["vram_gib"]}

    assert vram(own, True) == vram(plain, True)  # the rented pod's allocator whatever this environment says
    assert vram(own, False) and all(vram(own, False)[o] != v for o, v in vram(plain, False).items())
    assert own["pod_bill"] == plain["pod_bill"]


def test_every_function_the_dryrun_bench_times_exists():
    """bench/dryrun.py times fourloops' parse-time work by wrapping functions by name (PHASES): a function renamed or
    removed (yamlcheck.load_problem) ended the bench with a KeyError after its warm build, measuring nothing."""
    import importlib
    import importlib.util

    spec = importlib.util.spec_from_file_location("dryrun_bench", REPO / "bench" / "dryrun.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    missing = []
    for phase, names in bench.PHASES.items():
        for module, attr in names:
            owner = importlib.import_module(module)
            for part in attr.split("."):
                owner = getattr(owner, part, None)
            if not callable(owner):
                missing.append(f"{phase}: {module}.{attr}")
    assert not missing, missing
