"""Walls before work: refused in seconds, with RFD 1165's table, before any job starts."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import yaml

from conftest import REPO, SNAKEMAKE, snakemake_env
from fourloops import asks, levers, machines, refusal, walls

MACHINES = machines.load(REPO / "config" / "machines.yaml")
FACTS = asks.load_facts(REPO / "config" / "models.yaml")


def pending(rule, output, profile, vram_gib=0.0, ram_gib=1.0, **kw):
    return walls.PendingJob(rule=rule, output=output, profile=profile, ask=asks.Ask.of(vram_gib, ram_gib, **kw))


def dfc_job():
    ask = asks.recorded_ask(FACTS, "dfc_optimize", licensed=("dfc",))
    return walls.PendingJob(rule="hef_optimize", output="results/hef/model.hef", profile="container", ask=ask)


def test_dfc_optimize_is_refused_on_the_desk_with_rfd_1165s_table():
    v = walls.check_jobs([dfc_job()], MACHINES, "desk")
    assert not v.ok
    text = refusal.report(v, MACHINES)
    for word in ("wall", "asked", "available", "verdict", "source of the asked figure",
                 "video memory", "32.50 GiB", "24.00 GiB", "RFD 1165", "fits pod: NVIDIA A40 46 GiB"):
        assert word in text, (word, text)


def test_the_same_job_fits_the_pod():
    assert walls.check_jobs([dfc_job()], MACHINES, "pod").ok


def test_usb_device_fits_only_the_desk():
    job = pending("run2", "x", "desk", 0, 1, devices=("hailo_usb",))
    assert walls.check_jobs([job], MACHINES, "desk").ok
    assert not walls.check_jobs([job], MACHINES, "pod").ok


def test_an_ask_above_the_profiles_vram_resource_is_refused_not_capped():
    job = pending("g", "x", "pod", 30.0, 1, devices=("cuda",))
    v = walls.check_jobs([job], MACHINES, "pod", provided_vram_mb=24576)
    assert not v.ok and "cap" in refusal.report(v, MACHINES)


def test_the_default_profile_declares_the_desk_card():
    prof = yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())
    desk = machines.machine(MACHINES, "desk")
    assert f"vram_mb={machines.card_capacity_mb(desk)}" in prof["resources"]


# ------------------------------------------------------------------------------- the real workflow
def run(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir), "-c1", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=snakemake_env(), cwd=workdir, timeout=300)


# the torch peak a probe reports for the wall check to ask 32.5 GiB (the DFC's figure, RFD 1165)
# (ask = peak x (1 + reserve) + (peak - weights) x activations reserve + context, solved for the peak)
_OVER, _WEIGHTS = FACTS["process_overhead"]["inference"], asks.weights_gib(FACTS, "omnigen2", "bf16")
PEAK_ASKING_32_5 = ((32.5 - _OVER["cuda_context_gib"] + _WEIGHTS * _OVER["activations_reserve"])
                    / (1 + _OVER["allocator_reserve"] + _OVER["activations_reserve"]))


def probe_says(workdir: Path, gib: float) -> None:
    gen = {"backend": "omnigen2", "precision": "bf16", "size": 512}
    p = workdir / "results" / "probe" / "desk" / "generator.json"
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps({"key": asks.generator_key(gen), "peak_vram_gib": gib, "machine_name": "desk",
                             "gpu_name": "NVIDIA GeForce RTX 3090"}))


def test_desk_run_asking_32_5_gib_is_refused_before_any_job_and_the_probe_is_named(tmp_path):
    probe_says(tmp_path, PEAK_ASKING_32_5)  # + allocator reserve + CUDA context = 32.5 GiB asked
    proc = run(tmp_path, "--config", "model_set=real", "--", "results/ladder.csv")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "walls:" in out and "32.50 GiB" in out and "measured: probe on desk" in out, out[-3000:]
    assert "fits pod: NVIDIA A40 46 GiB" in out
    written = [p for p in (tmp_path / "results").rglob("*") if p.is_file() and "probe" not in p.parts]
    assert written == []
    assert not (tmp_path / "logs").exists()


def test_the_same_dag_on_the_pod_passes_the_wall_check(tmp_path):
    probe_says(tmp_path, PEAK_ASKING_32_5)
    proc = run(tmp_path, "--config", "model_set=real", "machine=pod", "--resources", "vram_mb=47104",
               "--", "results/ladder.csv")
    out = proc.stdout + proc.stderr
    assert "walls:" not in out, out[-3000:]
    # no GPU and no weights here: the next check (weights, CUDA) is what stops it, still before any job
    assert proc.returncode != 0 and "the real model set cannot run on this machine" in out, out[-3000:]


SYNTH = """
from fourloops import asks
ASK = asks.gib_to_mb(15.0)
rule all:
    input: "a.txt", "b.txt"
rule gpu:
    output: "{x}.txt"
    resources: vram_mb=ASK
    shell: "date +%s.%N > {output}; sleep 2; date +%s.%N >> {output}"
"""


def test_two_15_gib_jobs_never_overlap_on_a_24_gib_card(tmp_path):
    (tmp_path / "Snakefile").write_text(SYNTH)
    desk = machines.machine(MACHINES, "desk")
    proc = subprocess.run([SNAKEMAKE, "-c2", "--resources", f"vram_mb={machines.card_capacity_mb(desk)}"],
                          cwd=tmp_path, capture_output=True, text=True, env=snakemake_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (a0, a1), (b0, b1) = ([float(x) for x in (tmp_path / f).read_text().split()] for f in ("a.txt", "b.txt"))
    assert a1 <= b0 or b1 <= a0, "two 15 GiB jobs ran at once on a 24 GiB card"


def test_under_the_pod_executor_pod_jobs_meet_the_pods_walls_and_desk_jobs_the_desks():
    gen = pending("generate", "g", "pod", 30.0, 8, devices=("cuda",))
    usb = pending("run2", "r", "desk", 0, 1, devices=("hailo_usb",))
    assert not walls.check_jobs([gen, usb], MACHINES, "desk").ok  # all on the desk: 30 GiB > 24 GiB
    placed = walls.check_jobs([gen, usb], MACHINES, "desk", placement={"pod": "pod"})
    assert placed.ok, refusal.report(placed, MACHINES)


def test_each_profile_tag_runs_where_machines_yaml_and_the_executor_say():
    """desk jobs on the target, pod jobs on the pod under the pod executor, container jobs in the container on
    whichever machine the run sends them to; a tag's own machine (what prices it, the levers' "home") is its
    machine, or the container's host."""
    table = copy.deepcopy(MACHINES)
    runpod = machines.placement("runpod", table)
    where = {(tag, executor): machines.runs_on(table, tag, "desk", placed).name
             for tag in machines.PROFILE_TAGS for executor, placed in (("local", None), ("runpod", runpod))}
    assert where == {("desk", "local"): "desk", ("desk", "runpod"): "desk",
                     ("pod", "local"): "desk", ("pod", "runpod"): "pod",
                     ("container", "local"): "container on desk", ("container", "runpod"): "container on pod"}
    assert {tag: machines.home(table, tag) for tag in machines.PROFILE_TAGS} == \
        {"desk": "desk", "pod": "pod", "container": "pod"}
    job = dfc_job()
    assert walls.target_for(job, table, "desk", runpod).name == "container on pod"
    assert [p.label for p in levers.places(job, table, "desk")[0] if p.home] == ["container on pod"]
    table["container"]["host"] = "desk"  # a container on the desk: it is at home there, and stays there under runpod
    runpod = machines.placement("runpod", table)
    assert machines.home(table, "container") == "desk" and "container" not in runpod
    assert machines.runs_on(table, "container", "desk", runpod).name == "container on desk"
    assert [p.label for p in levers.places(job, table, "desk")[0] if p.home] == ["container on desk"]
