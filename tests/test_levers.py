"""A refusal names its levers: each re-asked through the job's own stage ask, each with the figure it would then
ask, where it would then fit and at what cost; "no lever reaches it" when none does."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, SNAKEMAKE, driver_sees, pinned, snakemake_env
from fourloops import asks, levers, machines, refusal, walls
from fourloops.stage import AskContext, stage_for

MACHINES = machines.load(REPO / "config" / "machines.yaml")
FACTS = asks.load_facts(REPO / "config" / "models.yaml")
FOURLOOPS = str(Path(sys.executable).with_name("fourloops"))


def generator(backend: str = "qwen_image_edit_plus", precision: str = "bf16", size: int = 512) -> dict:
    return {"backend": backend, "model": "x", "revision": "main", "precision": precision, "device": "cuda",
            "steps": 28, "guidance": 4.0, "size": size, "negative_prompt": ""}


def generate_job(gen: dict, facts: dict = FACTS, machine: str = "desk") -> walls.PendingJob:
    """A generate job as the workflow builds it: its params, and the stage's own ask of them."""
    params = {"job": {"model_set": "real", "generator": gen, "reference_azimuths": [0, 180],
                      "azimuths": [0, 90, 270]}}
    ctx = AskContext(facts, None, machine)
    ask = stage_for("generate").ask_for(ctx, {"condition": "B"}, params)
    return walls.PendingJob("generate", "results/generate/B/az000.png", "pod", ask, {"condition": "B"}, params, ctx)


def dfc_job() -> walls.PendingJob:
    schema = yaml.safe_load((REPO / "config" / "schema.d" / "hef.yaml").read_text())
    params = {"hef": {k: v["default"] for k, v in schema["properties"].items() if "default" in v}}
    ctx = AskContext(FACTS)
    ask = stage_for("hef_compile").ask_for(ctx, {}, params)
    return walls.PendingJob("hef_compile", "results/hef/rfdetr-keypoint.hef", "container", ask, {}, params, ctx)


def by_name(found: levers.Levers) -> dict[str, levers.Lever]:
    return {lv.name: lv for lv in found.levers}


def machines_copy(tmp_path: Path, change) -> dict:
    data = yaml.safe_load((REPO / "config" / "machines.yaml").read_text())
    change(data)
    path = tmp_path / "machines.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return machines.load(path)




# ---------------------------------------------------------------------------------- the heavy generator
def test_the_heavy_generators_nf4_lever_is_the_generator_ask_at_nf4_and_says_where_it_then_fits():
    job = generate_job(generator())
    # the issue's 54.73 GiB was the estimate + a 0.5 GiB context; now + the allocator reserve + the measured context
    gib, _ = asks.estimate_vram_gib(FACTS, "qwen_image_edit_plus", precision="bf16", resolution=512)
    weights = asks.weights_gib(FACTS, "qwen_image_edit_plus", "bf16")
    assert job.ask.vram.value == pytest.approx(driver_sees(gib, weights, references=2)) and job.ask.vram.value > 54.73
    v = walls.check_jobs([job], MACHINES, "desk")
    assert not v.ok
    found = levers.find(job, MACHINES, "desk")
    nf4 = by_name(found)["generator.precision: nf4"]
    # the same function, not a constant
    assert nf4.ask == asks.generator_ask(FACTS, generator(precision="nf4"), n_references=2, n_views=3,
                                         machine="desk")
    assert nf4.ask.vram_mb < job.ask.vram_mb
    # where it then fits: every wall of each machine, as the wall check judges it
    for label, m in (("desk", machines.machine(MACHINES, "desk")), ("pod", machines.machine(MACHINES, "pod"))):
        ok = all(r.ok for r in walls.check_job(walls.PendingJob("g", "x", "pod", nf4.ask), m))
        assert (label in nf4.fits) == ok
    # it reaches the desk: the card, and the host memory its load holds (the largest component, the 38 GiB
    # transformer, mapped in bf16, + the 4 GiB host process; the H200 measured 16.4 GiB RSS, 1.4 of it anonymous)
    assert nf4.ask.ram.value == pytest.approx(20.43e9 * 2 / 2**30 + 4.0)
    assert nf4.here and nf4.fits[0] == "desk" and not nf4.miss
    assert "cluster/rtx4090" in nf4.fits
    text = refusal.report(v, MACHINES)
    assert "levers (each re-asked through rule generate's own ask" in text
    assert "generator.precision: nf4" in text and f"{nf4.ask.vram_mb / 1024.0:.2f} GiB" in text


def test_offload_asks_the_largest_component_and_costs_its_slowdown():
    job = generate_job(generator())
    off = by_name(levers.find(job, MACHINES, "desk"))["offload"]
    gib, _ = asks.estimate_vram_gib(FACTS, "qwen_image_edit_plus", precision="bf16", resident=["transformer"],
                                    resolution=512)
    assert off.ask.vram.value == pytest.approx(driver_sees(gib, asks.weights_gib(FACTS, "qwen_image_edit_plus", "bf16",
                                                                                ["transformer"])))
    assert off.seconds == pytest.approx(job.ask.seconds.value * FACTS["offload"]["slowdown"])
    assert f"time x{FACTS['offload']['slowdown']:g} ({FACTS['offload']['source']})" in off.note
    assert "runbook §1" in off.note


def test_no_larger_pod_class_is_said_with_the_largest_configured():
    job = generate_job(generator())
    row = by_name(levers.find(job, MACHINES, "desk"))["pod GPU class"]
    pod = machines.machine(MACHINES, "pod")
    assert not row.fits and f"more than the pod's {pod.vram_gib:.2f} GiB" in row.miss
    assert f"the job asks {job.ask.vram.value:.2f} GiB" in row.miss


def test_a_larger_pod_class_is_a_lever_with_its_price(tmp_path):
    def bigger(d):
        d["pod"]["gpu_classes"].append({"id": "NVIDIA H100 80GB HBM3", "vram_gb": 80, "secure_usd": 2.69})
        d["pod"]["ram_gib"] = 64.0

    table = machines_copy(tmp_path, bigger)
    job = generate_job(generator())
    found = by_name(levers.find(job, table, "desk"))
    h100 = next(lv for name, lv in found.items() if "NVIDIA H100 80GB HBM3" in name)
    assert h100.kind == "gpu_class" and h100.fits == ("pod on NVIDIA H100 80GB HBM3",)
    assert h100.hourly_usd == 2.69 and h100.cost_usd == pytest.approx(job.ask.seconds.value / 3600 * 2.69)
    assert "pod GPU class" not in found


def test_the_pod_classes_the_levers_offer_are_the_ones_the_executor_asks_runpod_for(tmp_path):
    """A widened GPU type (pod.runpod.widen_gpus) is a lever only because the executor may be given it."""
    from snakemake_executor_plugin_runpod.settings import PodSpec

    def widened(d):
        d["pod"]["small_cards"].append({"id": "NVIDIA H100 80GB HBM3", "vram_gb": 80, "secure_usd": 2.69})
        d["pod"]["runpod"]["widen_gpus"] = ["NVIDIA H100 80GB HBM3"]
        d["pod"]["ram_gib"] = 64.0

    table = machines_copy(tmp_path, widened)
    asked = PodSpec.from_machines(table["pod"], tmp_path / "machines.yaml").gpus
    assert asked[-1] == "NVIDIA H100 80GB HBM3"
    offered = [lv.name for lv in levers.find(generate_job(generator()), table, "desk").levers if lv.kind == "gpu_class"
               and lv.fits]
    assert offered and all(any(f"({gpu} " in name for gpu in asked) for name in offered), (offered, asked)
    assert any("NVIDIA H100 80GB HBM3" in name for name in offered)


def test_the_mildest_precision_that_fits_here_is_the_lever():
    job = generate_job(generator("omnigen2", "fp32"))  # the seeds' fp32: refused on the desk
    assert not walls.check_jobs([job], MACHINES, "desk").ok
    found = levers.find(job, MACHINES, "desk")
    prec = [lv for lv in found.levers if lv.kind == "precision"]
    assert [lv.name for lv in prec] == ["generator.precision: bf16"] and prec[0].here
    assert prec[0].ask == asks.generator_ask(FACTS, generator("omnigen2", "bf16"), n_references=2, n_views=3)
    assert found.summary.startswith("reaches it here: generator.precision: bf16")


def test_a_batch_asked_by_number_offers_the_largest_of_its_halves_that_fits():
    """OmniGen2 at bf16, 16 views a call of 16 views: refused on the desk's 24 GiB; the batch lever is the largest
    half of 16 whose ask, through the stage's own ask at that batch, fits here."""
    gen = {**generator("omnigen2", "bf16"), "batch": 16}
    params = {"job": {"model_set": "real", "generator": gen, "reference_azimuths": [0], "azimuths": list(range(16))}}
    ctx = AskContext(FACTS, None, "desk")
    ask = stage_for("generate").ask_for(ctx, {"condition": "A"}, params)
    job = walls.PendingJob("generate", "results/generate/A/az000.png", "pod", ask, {"condition": "A"}, params, ctx)
    assert ask.batch == 16 and not walls.check_jobs([job], MACHINES, "desk").ok
    (lever,) = [lv for lv in levers.find(job, MACHINES, "desk").levers if lv.kind == "batch"]
    at = {b: asks.generator_ask(FACTS, gen, n_references=1, n_views=16, batch=b).vram.value for b in (8, 4, 2, 1)}
    card = machines.machine(MACHINES, "desk").vram_gib
    largest = max(b for b, gib in at.items() if gib <= card)
    assert lever.here and lever.name == f"generator.batch: {largest}"
    assert lever.ask.vram.value == at[largest] and lever.ask.batch == largest


# ---------------------------------------------------------------------------------- none reaches
def test_a_job_no_lever_reaches_says_so_with_the_nearest_miss():
    facts = copy.deepcopy(FACTS)
    facts["models"]["huge"] = {"kind": "generator", "components": {
        "transformer": {"params": 400e9}, "text_encoder": {"params": 20e9}}, "activations_gib": {"inference": {512: 1.0}}}
    job = generate_job(generator("huge"), facts)
    v = walls.check_jobs([job], MACHINES, "desk")
    found = levers.find(job, MACHINES, "desk")
    assert not found.reaches and all(not lv.fits for lv in found.levers)
    assert {lv.kind for lv in found.levers} >= {"precision", "size", "offload", "together"}
    assert found.summary.startswith("no lever reaches it; nearest: ")
    text = refusal.report(v, MACHINES)
    assert "fits no configured machine" in text and found.summary in text


# ---------------------------------------------------------------------------------- the DFC
def test_the_dfcs_recorded_32_5_gib_has_only_where_it_runs_the_a40_pod_at_its_price():
    job = dfc_job()
    v = walls.check_jobs([job], MACHINES, "desk")
    assert not v.ok
    found = levers.find(job, MACHINES, "desk")
    assert {lv.kind for lv in found.levers} == {"placement"}  # no precision, size or offload lever
    pod = machines.machine(MACHINES, "pod")
    lever = next(lv for lv in found.levers if lv.fits)
    assert lever.fits == ("container on pod",) and f"{pod.gpu_name} {pod.vram_gib:g} GiB" in lever.name
    assert lever.hourly_usd == pod.hourly_usd and lever.cost_usd == pytest.approx(job.ask.seconds.value / 3600 * pod.hourly_usd)
    assert any("not levers here: dfc_optimize's figures are recorded" in n for n in found.notes)
    text = refusal.report(v, MACHINES)
    assert f"${pod.hourly_usd:.2f}/h = ${lever.cost_usd:.2f}" in text and "NVIDIA A40 46 GiB" in text
    # container.host: pod, so profiles/pod sends the DFC's job to the pod: no "sends only pod jobs" caveat
    assert "container" in machines.placement("runpod", MACHINES) and "profiles/pod sends only" not in text


# ---------------------------------------------------------------------------------- computed, not canned
def test_the_levers_text_follows_machines_yaml(tmp_path):
    job = generate_job(generator())
    small = machines_copy(tmp_path, lambda d: d["desk"].update(ram_gib=32.0))  # below the NF4 load's 42.05 GiB
    before = levers.format_levers(levers.find(job, small, "desk"))
    found = levers.find(job, MACHINES, "desk")
    nf4 = by_name(found)["generator.precision: nf4"]
    assert nf4.here and nf4.fits[0] == "desk" and found.summary.startswith("reaches it here: generator.precision: nf4")
    after = levers.format_levers(found)
    assert before != after and "desk (here)" in after and "desk (here)" not in before

    dfc = dfc_job()
    priced = machines_copy(tmp_path, lambda d: d["pod"].update(hourly_usd=1.25))
    text = levers.format_levers(levers.find(dfc, priced, "desk"))
    assert "$1.25/h" in text and "$0.49/h" not in text


def test_a_hand_made_job_gets_where_it_runs_only():
    job = walls.PendingJob("g", "x", "pod", asks.Ask.of(30.0, 8.0, devices=("cuda",)))
    found = levers.find(job, MACHINES, "desk")
    assert {lv.kind for lv in found.levers} == {"placement"} and any("no params" in n for n in found.notes)


# ---------------------------------------------------------------------------------- plan and the wall check
def test_the_plan_and_the_wall_check_name_the_same_levers(tmp_path):
    cfg = tmp_path / "qwen.yaml"
    cfg.write_text("generator:\n  backend: qwen_image_edit_plus\n  model: Qwen/Qwen-Image-Edit-2509\n  precision: bf16\n")
    proc = subprocess.run([FOURLOOPS, "plan", "--json", "--directory", str(tmp_path), "-s", str(REPO / "Snakefile"),
                           "--machine", "desk", "--config", "model_set=real", "--configfile", str(cfg), "--",
                           "results/ladder.csv"], capture_output=True, text=True, env=snakemake_env(), cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    plan = json.loads(proc.stdout)
    refused = [j for j in plan["jobs"] if j["verdict"].startswith("REFUSED")]
    # the camera LoRA's training of the 20 B Qwen-Image transformer (38 GiB bf16) does not fit the desk either
    assert {j["rule"] for j in refused} == {"generate", "lora_train"}
    refused = [j for j in refused if j["rule"] == "generate"]
    assert all(j["levers"] is None for j in plan["jobs"] if j["verdict"] == "fits")  # only refused jobs pay
    # condition B's job, 2 references (the ask depends on them: models.yaml activations_reserve_by_references)
    (b,) = [j for j in refused if j["wildcards"] == {"condition": "B"}]
    names = {lv["lever"]: lv for lv in b["levers"]["levers"]}
    nf4 = asks.generator_ask(FACTS, generator(precision="nf4"), n_references=2, n_views=3, machine="desk").vram.value
    assert names["generator.precision: nf4"]["vram_gib"] == round(nf4, 2) and "cluster/rtx4090" in names["generator.precision: nf4"]["fits"]
    assert "generator.precision: nf4" in plan["refusals"]
    # the real run's wall check, before any job: the same table
    run = subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), "-c1", "--config",
                          "model_set=real", "--configfile", str(cfg), "--", "results/ladder.csv"],
                         capture_output=True, text=True, env=snakemake_env(), cwd=tmp_path, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "walls:" in out and "generator.precision: nf4" in out and f"{nf4:.2f} GiB" in out, out[-3000:]


def test_the_walls_ask_by_the_allocator_the_jobs_will_run_under(tmp_path):
    # the desk's cuda_allocator is default, but a user's own PYTORCH_CUDA_ALLOC_CONF stands over it for the jobs this
    # Snakemake starts (rules/common.smk): they run with expandable segments, so the walls ask by
    # process_overhead_expandable, not by the default allocator's pool slack
    env = {**snakemake_env(), "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    # and a probe made under the default allocator is a floor for their estimate, not their ask (asks.Measurements)
    probe = tmp_path / "results" / "probe" / "desk" / "generator.json"
    probe.parent.mkdir(parents=True)
    probe.write_text(json.dumps({"key": "generator/omnigen2/bf16/512", "peak_vram_gib": 14.6, "machine_name": "desk",
                                 "cuda_allocator": {"env": {}, "expandable_segments": False}}))
    proc = subprocess.run([FOURLOOPS, "plan", "--json", "--directory", str(tmp_path), "-s", str(REPO / "Snakefile"),
                           "--machine", "desk", "--config", "model_set=real", "--configfile", pinned(tmp_path), "--",
                           "results/generate/A/views.json"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    gen = next(j for j in json.loads(proc.stdout)["jobs"] if j["rule"] == "generate")
    exp, default = FACTS["process_overhead_expandable"]["inference"], FACTS["process_overhead"]["inference"]
    assert exp["activations_reserve"] != default["activations_reserve"]
    assert (f"inference process: allocator reserve {exp['allocator_reserve']:.1%} + {exp['activations_reserve']:.1%} "
            "of the") in gen["vram_source"], gen
    assert "under torch's default allocator, not the expandable_segments one these jobs run under" in gen["vram_source"], gen
