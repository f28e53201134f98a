"""What each job asks: the estimator against every measured row in config/models.yaml (within 10%)."""

from __future__ import annotations

import copy
import dataclasses
import decimal
import json
import os
import re

import pytest

from conftest import REPO, driver_sees
from fourloops import asks
from fourloops.stage import measured_key

FACTS = asks.load_facts(REPO / "config" / "models.yaml")


OMNIGEN2_BF16 = asks.weights_gib(FACTS, "omnigen2", "bf16")  # 14.54 GiB resident: the rest of a peak is the pass's
ROWS = [
    pytest.param(name, row, id=f"{name}-{i}-{row['mode']}-{row['gib']}")
    for name, model in FACTS["models"].items()
    for i, row in enumerate(model.get("measured") or [])
]


@pytest.mark.parametrize("name,row", ROWS)
def test_estimator_is_within_ten_percent_of_every_measured_row(name, row):
    cfg = {k: row[k] for k in ("mode", "precision", "resident", "resolution", "batch", "frozen_dtype") if k in row}
    gib, _ = asks.estimate_vram_gib(FACTS, name, **cfg)
    assert abs(gib - row["gib"]) <= 0.10 * row["gib"], (name, row, gib)


def test_activations_between_two_measured_resolutions_are_linear_in_the_pixel_count_and_scale_outside():
    # 640 px between 512 and 768: 640^2 - 512^2 = 147456 of 768^2 - 512^2 = 327680 -> 1 + 0.45 x 3 = 2.35
    model = {"activations_gib": {"inference": {512: 1.0, 768: 4.0}}}
    assert asks._activation(model, "inference", 640, "pixels_linear") == pytest.approx(1.0 + 147456 / 327680 * 3.0)
    assert asks._activation(model, "inference", 640) == pytest.approx(1.0 * (640 / 512) ** 2)  # older facts' reading
    assert asks._activation(model, "inference", 1024, "pixels_linear") == pytest.approx(4.0 * (1024 / 768) ** 2)
    assert asks._activation(model, "inference", 256, "pixels_linear") == pytest.approx(0.25)


def test_a_batched_call_holds_a_share_of_one_images_activations_once_and_the_rest_per_image():
    # 1 GiB of weights, 0.5 GiB of activations an image, a share of 0.2 held once: 8 images -> 0.5 x (0.2 + 0.8 x 8)
    facts = {"bytes_per_param": {"fp32": 4.0}, "models": {"m": {
        "components": {"model": {"params": 2 ** 30 / 4}}, "activations_gib": {"inference": {576: 0.5}},
        "activations_batch_shared": 0.2}}}
    gib, _ = asks.estimate_vram_gib(facts, "m", precision="fp32", resolution=576, batch=8)
    assert gib == pytest.approx(1.0 + 0.5 * 6.6)
    del facts["models"]["m"]["activations_batch_shared"]  # older facts: one image's activations x the batch
    assert asks.estimate_vram_gib(facts, "m", precision="fp32", resolution=576, batch=8)[0] == pytest.approx(5.0)


def test_every_measured_row_names_its_source():
    assert len(ROWS) >= 25
    for p in ROWS:
        assert p.values[1]["source"]


def test_nf4_is_not_params_times_half_a_byte():
    naive = 8.767e9 * 0.5 / asks.GIB
    gib, _ = asks.estimate_vram_gib(FACTS, "qwen3_vl_8b", mode="weights", precision="nf4")
    assert gib > naive + 1.5  # embeddings, head and absmax tables count (measured-h200-2026-11-30.md: 6.29 GiB)


def test_frozen_dtype_and_resident_text_encoder_decide_whether_lora_512_fits_the_desk():
    fp32_te, _ = asks.estimate_vram_gib(FACTS, "omnigen2", mode="lora_step", frozen_dtype="fp32",
                                        resident=["transformer", "text_encoder"], resolution=512)
    bf16, _ = asks.estimate_vram_gib(FACTS, "omnigen2", mode="lora_step", frozen_dtype="bf16",
                                     resident=["transformer"], resolution=512)
    ctx = FACTS["cuda_context_gib"]
    assert fp32_te + ctx > 24.0 > bf16 + ctx


def test_fp32_frozen_weights_add_the_cast_and_a_share_of_the_steps_activations():
    # 1024 px: the lora_step table's 6.13 GiB; the fp32 step's excess over bf16's = its weights' + 1.0 + 0.5 x 6.13
    facts = copy.deepcopy(FACTS)
    facts["models"]["omnigen2"].update(autocast_cast_gib=1.0, autocast_activations_share=0.5)
    assert facts["models"]["omnigen2"]["activations_gib"]["lora_step"][1024] == 6.13
    cfg = dict(mode="lora_step", resident=["transformer"], resolution=1024)
    fp32, _ = asks.estimate_vram_gib(facts, "omnigen2", frozen_dtype="fp32", **cfg)
    bf16, _ = asks.estimate_vram_gib(facts, "omnigen2", frozen_dtype="bf16", **cfg)
    weights = (asks.weights_gib(facts, "omnigen2", "fp32", ["transformer"])
               - asks.weights_gib(facts, "omnigen2", "bf16", ["transformer"]))
    assert fp32 - bf16 - weights == pytest.approx(1.0 + 3.065)
    del facts["models"]["omnigen2"]["autocast_activations_share"]  # a models.yaml before the share: the cast alone
    assert asks.estimate_vram_gib(facts, "omnigen2", frozen_dtype="fp32", **cfg)[0] == pytest.approx(fp32 - 3.065)


def test_dfc_optimize_asks_its_recorded_walls():
    ask = asks.recorded_ask(FACTS, "dfc_optimize", licensed=("dfc",))
    assert (ask.vram.value, ask.ram.value) == (32.5, 39.87)
    assert "RFD 1165" in ask.vram.source


GEN = {"backend": "omnigen2", "precision": "bf16", "size": 512, "device": "cuda"}


def test_generator_ask_uses_the_seed_measurement_plus_cuda_context():
    ask = asks.generator_ask(FACTS, GEN, n_references=3)
    assert ask.vram.value == pytest.approx(driver_sees(15.43, OMNIGEN2_BF16))  # the H200's measured pass at 3 references, 512 px
    assert "H200" in ask.vram.source and ask.devices == ("cuda",)
    # the same pass with 1 reference: the pool keeps less of it (models.yaml activations_reserve_by_references)
    one = asks.generator_ask(FACTS, GEN, n_references=1).vram
    assert one.value == pytest.approx(driver_sees(15.43, OMNIGEN2_BF16, references=1)) and one.value < ask.vram.value
    assert "(1 reference(s))" in one.source


def test_a_generator_pass_smaller_than_any_measured_keeps_the_pools_floor():
    # OmniGen2 NF4 at 192 px with 1 reference: its activations scale down from the activation table's smallest entry,
    # and the pool keeps at least activations_floor_gib of the pass however small (the thirty-second GPU run's 512 px
    # kept 0.44 GiB of a 0.67 GiB pass, over the 1-reference share); without the floor the ask would shrink with the pass
    gen = {**GEN, "precision": "nf4", "size": 192}
    assert 192 < min(FACTS["models"]["omnigen2"]["activations_gib"]["inference"])
    floor = FACTS["process_overhead"]["nf4"]["activations_floor_gib"]
    ask = asks.generator_ask(FACTS, gen, n_references=1).vram
    no_floor = copy.deepcopy(FACTS)
    del no_floor["process_overhead"]["nf4"]["activations_floor_gib"]
    shrunk = asks.generator_ask(no_floor, gen, n_references=1).vram
    assert floor > 0 and "the pool's floor" in ask.source and "the pool's floor" not in shrunk.source
    # the floor takes the share's place, not its sum with it
    share = FACTS["process_overhead"]["nf4"]["activations_reserve_by_references"][1]
    peak, _ = asks.estimate_vram_gib(FACTS, "omnigen2", precision="nf4", resolution=192)
    act = peak - asks.weights_gib(FACTS, "omnigen2", "nf4")
    assert 0 < act * share < floor and ask.value - shrunk.value == pytest.approx(floor - act * share)


def test_a_probe_beats_provenance_beats_the_estimate(tmp_path):
    assert asks.generator_ask(FACTS, GEN, measured=asks.Measurements.load(tmp_path, measured_key)).vram.source.startswith("measured: H200")
    prov = tmp_path / "results" / "provenance" / "generate" / "A.json"
    prov.parent.mkdir(parents=True)
    prov.write_text(json.dumps({"rule": "generate", "params": {"job": {"generator": GEN}}, "peak_vram_gib": 15.1}))
    ask = asks.generator_ask(FACTS, GEN, measured=asks.Measurements.load(tmp_path, measured_key))
    assert ask.vram.value == pytest.approx(driver_sees(15.1, OMNIGEN2_BF16, references=1)) and "provenance" in ask.vram.source
    # a later record of the same key with a smaller pass (fewer references, a restyle's one) does not lower it
    prov.with_name("B.json").write_text(json.dumps({"rule": "generate", "params": {"job": {"generator": GEN}},
                                                    "peak_vram_gib": 14.0}))
    ask = asks.generator_ask(FACTS, GEN, measured=asks.Measurements.load(tmp_path, measured_key))
    assert ask.vram.value == pytest.approx(driver_sees(15.1, OMNIGEN2_BF16, references=1)) and "A.json" in ask.vram.source
    probe = tmp_path / "results" / "probe" / "desk" / "generator.json"
    probe.parent.mkdir(parents=True)
    probe.write_text(json.dumps({"key": asks.generator_key(GEN), "peak_vram_gib": 14.2, "machine_name": "desk",
                                 "gpu_name": "NVIDIA GeForce RTX 3090"}))
    ask = asks.generator_ask(FACTS, GEN, measured=asks.Measurements.load(tmp_path, measured_key), machine="desk")
    assert ask.vram.value == pytest.approx(driver_sees(14.2, OMNIGEN2_BF16, references=1)) and "probe on desk" in ask.vram.source


def test_a_measurement_with_fewer_references_is_a_floor_for_a_job_with_more(tmp_path):
    # the key names no reference count: A's pass (1 reference) is no measurement of C's (3)
    prov = tmp_path / "results" / "provenance" / "generate" / "A.json"
    prov.parent.mkdir(parents=True)
    job = {"generator": GEN, "reference_azimuths": [0]}
    prov.write_text(json.dumps({"rule": "generate", "params": {"job": job}, "peak_vram_gib": 14.0}))
    measured = asks.Measurements.load(tmp_path, measured_key)
    one, three = (asks.generator_ask(FACTS, GEN, n_references=n, measured=measured) for n in (1, 3))
    assert one.vram.value == pytest.approx(driver_sees(14.0, OMNIGEN2_BF16, references=1)) and "provenance" in one.vram.source
    unmeasured = asks.generator_ask(FACTS, GEN, n_references=3)  # the estimate: its activations measured with 3
    assert three.vram.value == pytest.approx(unmeasured.vram.value) and three.vram.value > one.vram.value
    assert "measured with at most 1 reference(s)" in three.vram.source
    prov.with_name("C.json").write_text(json.dumps({"rule": "generate", "params": {"job": {**job, "reference_azimuths":
                                                    [0, 90, 180]}}, "peak_vram_gib": 13.9}))
    three = asks.generator_ask(FACTS, GEN, n_references=3, measured=asks.Measurements.load(tmp_path, measured_key))
    assert three.vram.value == pytest.approx(driver_sees(14.0, OMNIGEN2_BF16))  # measured now: the key's largest


def test_a_lora_measurement_at_a_lower_rank_is_a_floor_for_a_job_at_a_higher_one(tmp_path):
    # the key names no rank: an earlier rank-8 job's step (9.0 GiB allocated) is no measurement of a rank-64 one
    train = {"backend": "omnigen2", "frozen_dtype": "bf16", "text_encoder": "precomputed", "resolution": 512,
             "device": "cuda", "accumulation": 8, "steps": 200}
    prov = tmp_path / "results" / "provenance" / "lora_train" / "camera.json"
    prov.parent.mkdir(parents=True)
    prov.write_text(json.dumps({"rule": "lora_train", "model_set": "real", "params": {"train": {**train, "rank": 8}},
                                "peak_vram_gib": 9.0}))
    measured = asks.Measurements.load(tmp_path, measured_key)
    assert measured.ranks == {asks.lora_key(train): 8}
    at = {r: asks.lora_ask(FACTS, {**train, "rank": r}, measured=measured) for r in (8, 64)}
    assert "provenance" in at[8].vram.source.split(" + ")[0]
    unmeasured = asks.lora_ask(FACTS, {**train, "rank": 64})  # the estimate: the rank term over the 512 px step
    assert at[64].vram.value == pytest.approx(unmeasured.vram.value) and at[64].vram.value > at[8].vram.value
    assert "measured at rank 8" in at[64].vram.source


def test_a_lora_micro_batch_adds_the_measured_growth_of_each_further_sample_to_the_one_sample_ask():
    # lora_batch_item_gib is what a further sample adds to the driver's peak, the pool's slack in it: no process
    # reserve is laid over it (a step's activations under the training reserve asked 26.1 GiB at 8 samples where
    # the driver held 20.7); without the table, the further samples stay under the reserve
    train = {"backend": "omnigen2", "frozen_dtype": "bf16", "text_encoder": "precomputed", "resolution": 512,
             "device": "cuda", "accumulation": 8, "steps": 10}
    item = FACTS["models"]["omnigen2"]["lora_batch_item_gib"][512]
    one = asks.lora_ask(FACTS, train).vram.value
    for b in (2, 4, 8):
        at = asks.lora_ask(FACTS, train, batch=b).vram
        assert at.value == pytest.approx(one + (b - 1) * item), b
        assert "lora_batch_item_gib" in at.source
    bare = copy.deepcopy(FACTS)
    del bare["models"]["omnigen2"]["lora_batch_item_gib"]
    step = bare["models"]["omnigen2"]["activations_gib"]["lora_step"][512]
    assert asks.lora_ask(bare, train, batch=8).vram.value > one + 7 * step
    # in-sample (the table was measured from these two jobs): each asked at or above its driver's peak, within +10%
    record = REPO / "bench" / "results" / "batching-h100-2026-12-07"
    for w in ("w3", "w4"):
        rec = json.loads((record / w / "results" / "provenance" / "lora_train" / "camera.json").read_text())
        job = {**rec["params"]["train"], "device": "cuda"}
        ask = asks.lora_ask(FACTS, job, batch=int(rec["micro_batch"])).vram.value
        assert 1.0 <= ask / rec["nvml_peak_gib"] <= 1.10, (w, ask, rec["nvml_peak_gib"])


def test_a_probe_under_another_allocator_is_a_floor_and_the_jobs_it_sized_ask_at_or_over_the_driver(tmp_path):
    # the twenty-second H200 run: the probes ran under expandable segments (the h200 machine's), the generate jobs
    # under the desk's default allocator, asked 16.641 GiB from the probe where the driver saw 16.848-17.006
    probes = tmp_path / "results" / "probe" / "h200"
    probes.mkdir(parents=True)
    for f in (RUN22 / "sizing" / "results" / "probe" / "h200").glob("*.json"):
        probes.joinpath(f.name).write_text(f.read_text())
    measured = asks.Measurements.load(tmp_path, measured_key)
    for condition in "ABC":
        job = json.loads((RUN22 / "sizing" / "results" / "provenance" / "generate" / f"{condition}.json").read_text())
        gen, refs = job["params"]["job"]["generator"], len(job["params"]["job"]["reference_azimuths"])

        def ask(allocator):
            return asks.generator_ask(asks.for_allocator(FACTS, allocator), gen, n_references=refs, machine="h200",
                                      measured=dataclasses.replace(measured, allocator=allocator)).vram

        default, expandable = ask("default"), ask("expandable_segments")
        assert default.value >= job["nvml_peak_gib"] and "not the default one these jobs run under" in default.source
        assert default.value == pytest.approx(asks.generator_ask(FACTS, gen, n_references=refs).vram.value)
        assert "probe on h200" in expandable.source.split(" + ")[0]
        assert "these jobs run under" not in expandable.source
    # an earlier job's provenance, the measurement where no probe is, the same
    prov = tmp_path / "hist" / "results" / "provenance" / "generate" / "A.json"
    prov.parent.mkdir(parents=True)
    prov.write_text(json.dumps({"rule": "generate", "params": {"job": {"generator": GEN}}, "peak_vram_gib": 14.6,
                                "cuda_allocator": {"env": {}, "expandable_segments": True}}))
    hist = asks.Measurements.load(tmp_path / "hist", measured_key)
    for allocator, floor in (("default", True), ("expandable_segments", False)):
        ask = asks.generator_ask(FACTS, GEN, measured=dataclasses.replace(hist, allocator=allocator)).vram
        assert ("not the default one these jobs run under" in ask.source) is floor, ask.source


def test_a_job_whose_driver_saw_more_than_the_model_asks_what_the_driver_saw(tmp_path):
    prov = tmp_path / "results" / "provenance" / "generate" / "A.json"
    prov.parent.mkdir(parents=True)
    model_ask = driver_sees(15.1, OMNIGEN2_BF16, references=1)
    record = {"rule": "generate", "params": {"job": {"generator": GEN}}, "peak_vram_gib": 15.1}
    prov.write_text(json.dumps({**record, "nvml_peak_gib": model_ask + 1.5}))
    ask = asks.generator_ask(FACTS, GEN, measured=asks.Measurements.load(tmp_path, measured_key))
    assert ask.vram.value == pytest.approx(model_ask + 1.5) and "NVML peak of the job" in ask.vram.source
    prov.write_text(json.dumps({**record, "nvml_peak_gib": model_ask - 1.0}))  # below the model: the model stands
    ask = asks.generator_ask(FACTS, GEN, measured=asks.Measurements.load(tmp_path, measured_key))
    assert ask.vram.value == pytest.approx(model_ask) and "provenance" in ask.vram.source


def test_cpu_jobs_ask_no_vram_and_no_device():
    ask = asks.generator_ask(FACTS, {**GEN, "device": "cpu"})
    assert ask.vram_mb == 0 and ask.devices == ()


def test_the_nf4_format_the_asks_assume_is_the_one_the_generator_loads():
    from fourloops.loading import NF4_DOUBLE_QUANT

    for backend, double in NF4_DOUBLE_QUANT.items():
        assert FACTS["models"][backend]["nf4_format"] == ("nf4_dq" if double else "nf4"), backend


def test_a_probe_on_the_target_machine_gives_the_forecast_seconds_and_another_machines_does_not(tmp_path):
    """Time depends on the GPU: the generator's seconds come from this machine's probe, per reference count."""
    probe = tmp_path / "results" / "probe" / "pod" / "generator.json"
    probe.parent.mkdir(parents=True)
    probe.write_text(json.dumps({
        "key": asks.generator_key(GEN), "peak_vram_gib": 15.4, "machine_name": "pod", "gpu_name": "NVIDIA H200",
        "load_seconds": 17.0, "configurations": [{"references": 1, "seconds_per_item": 7.0},
                                                 {"references": 3, "seconds_per_item": 8.0}]}))
    m = asks.Measurements.load(tmp_path, measured_key)
    on_pod = asks.generator_ask(FACTS, GEN, n_references=3, n_views=8, measured=m, machine="pod")
    assert on_pod.seconds.value == pytest.approx(17.0 + 8 * 8.0) and "probe on pod (NVIDIA H200)" in on_pod.seconds.source
    on_desk = asks.generator_ask(FACTS, GEN, n_references=3, n_views=8, measured=m, machine="desk")
    assert on_desk.seconds.value == pytest.approx(60 + 8 * 529)  # the desk's own seed figures (RFD 1163)
    # a reference count beyond those the probe ran keeps the estimate (one between them is read between them)
    assert "estimate" in asks.generator_ask(FACTS, GEN, n_references=4, measured=m, machine="pod").seconds.source


# ------------------------------------------- what the driver sees, per kind of process (bench/walls_fit.py)
def _bench(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def walls_fit():
    return _bench("walls_fit")


def test_the_committed_walls_table_regenerates_from_the_committed_records(walls_fit):
    assert walls_fit.table() == walls_fit.TABLE.read_text()


def test_the_rank_term_is_judged_on_one_allocators_footing_by_the_offset_measured_elsewhere(walls_fit, monkeypatch):
    # the default allocator's peak at 768 px rank 16, the expandable one's at rank 64; the two allocators measured at
    # 384 px rank 16 apart by -0.1 GiB: on the expandable footing the rise is 10.2 - (10.0 - 0.1) = 0.3, not 0.2;
    # and the other way round at 1024 px: (13.6 - 0.1) - 13.4 = 0.1, not 0.2
    def lora(resolution, rank, allocated):
        return {"component": "lora_step", "allocated": allocated, "config": {
            "frozen_dtype": "bf16", "text_encoder": "precomputed", "resolution": resolution, "rank": rank}}

    monkeypatch.setattr(walls_fit, "rows", lambda: [lora(512, 8, 9.0), lora(512, 32, 9.06), lora(384, 16, 8.5),
                                                    lora(768, 16, 10.0), lora(1024, 16, 13.6)])
    monkeypatch.setattr(walls_fit, "probe_rows", lambda folders, **kw: [lora(384, 16, 8.4), lora(768, 64, 10.2),
                                                                        lora(1024, 4, 13.4)])
    monkeypatch.setattr(walls_fit, "_facts", lambda *a: {"models": {"omnigen2": {"lora_gib_per_rank": 0.0025}}})
    lines = walls_fit.rank_lines()
    assert "| 768 | 16 -> 64 | default -> expandable | 10.000 -> 10.200 | +0.200 | +0.300 to +0.300 | +0.120 | held out |" \
        in lines, lines
    assert "| 512 | 8 -> 32 | default -> default | 9.000 -> 9.060 | +0.060 | +0.060 | +0.060 | in-sample |" in lines
    assert not [line for line in lines if line.startswith("| 384 ")]  # one rank only: nothing to judge
    assert "| 1024 | 4 -> 16 | expandable -> default | 13.400 -> 13.600 | +0.200 | +0.100 to +0.100 | +0.030 | held out |" \
        in lines, lines
    assert lines[-1] == "- the rank term, held-out pairs: 2; rise on one footing minus the term from +0.070 to +0.180 GiB"


def test_the_fp32_term_is_the_least_slack_line_over_every_fp32_steps_excess(walls_fit, monkeypatch):
    # excesses over the table at activations 1, 2 and 4 GiB: 1.0, 1.75, 2.25; the line through the last two
    # (1.25 + 0.25 x) covers the first (1.5 > 1.0) with less total slack than the line through the first two
    # (0.25 + 0.75 x: 3.25 at 4); a bf16 step and a held-out fp32 one are not fitted
    def step(frozen, sample, point):
        return {"kind": "training", "sample": sample, "config": {"frozen_dtype": frozen}, "point": point}

    monkeypatch.setattr(walls_fit, "fp32_excess", lambda r, **kw: r["point"])
    got = walls_fit.fit_autocast([step("fp32", "in-sample", (1.0, 1.0)), step("fp32", "in-sample", (2.0, 1.75)),
                                  step("fp32", "in-sample", (4.0, 2.25)), step("bf16", "in-sample", (4.0, 9.0)),
                                  step("fp32", "held out", (4.0, 9.0))])
    assert got == (1.25, 0.25)


def test_models_yaml_holds_the_overheads_and_per_token_figure_the_records_give(walls_fit):
    fitted = walls_fit.fitted()
    keys = ("allocator_reserve", "activations_reserve", "cuda_context_gib")
    assert {k: FACTS[k] for k in keys} == {k: fitted["process_overhead"]["inference"][k] for k in keys}
    assert set(FACTS["process_overhead"]) == set(fitted["process_overhead"])
    # the training context from 384 px on (walls_fit.CONTEXT_STEPS); a generator kind's reserve by references
    stepped = keys + ("context_step", "activations_reserve_by_references", "activations_floor_gib")
    for kind, got in fitted["process_overhead"].items():
        assert FACTS["process_overhead"][kind] == {k: got[k] for k in stepped if k in got}, kind
    assert {kind: {k: got[k] for k in stepped if k in got} for kind, got in
            fitted["process_overhead_expandable"].items()} == FACTS["process_overhead_expandable"]
    assert fitted["process_overhead"]["training"]["context_step"]["cuda_context_gib"] < \
        fitted["process_overhead"]["training"]["cuda_context_gib"]
    assert FACTS["models"]["qwen3_vl_8b"]["activations_gib_per_prompt_token"] == \
        fitted["activations_gib_per_prompt_token"]
    assert FACTS["models"]["omnigen2"]["lora_gib_per_rank"] == fitted["lora_gib_per_rank"]
    omnigen2 = FACTS["models"]["omnigen2"]
    assert (omnigen2["autocast_cast_gib"], omnigen2["autocast_activations_share"]) == fitted["autocast"]
    det = FACTS["models"]["rfdetr_keypoint_preview"]
    assert det["activations_gib"]["inference"][576] == fitted["detector_activations_576"]
    assert det["activations_batch_shared"] == fitted["activations_batch_shared"]


def test_no_wall_ask_is_below_what_the_driver_saw_in_any_committed_gpu_record(walls_fit):
    rows = walls_fit.rows()
    assert len(rows) >= 20 and {r["kind"] for r in rows} == set(walls_fit.KINDS)
    # set apart, and only these: a detector probe's later calls, whose pool held its process's first call's blocks (no
    # job calls so: a keypoints job calls one image at a time); every one is a later configuration of its record
    apart = [r for r in rows if r["sample"] == walls_fit.AFTER_CALL]
    assert len(apart) >= 14 and {r["component"] for r in apart} == {"detector"}
    for r in apart:
        batches = [c["images_per_call"] for c in json.loads((REPO / r["record"]).read_text())["configurations"]]
        assert batches.index(r["config"]["images_per_call"]) > 0, (r["record"], batches)
    for row in rows + [h for run in walls_fit.HELDOUT_RUNS for h in walls_fit.heldout_rows(run)]:
        if row.get("after_call"):
            continue
        ask, source = walls_fit.asked_gib(row)
        assert ask >= row["nvml"], (row["record"], row["key"], ask, row["nvml"], source)


def test_records_under_expandable_segments_are_kept_apart_from_the_default_allocators(walls_fit):
    # the pool's slack differs by allocator: a record is "expandable" only where torch said so, or, where torch could
    # not say, where the environment asked for it; every record before the ninth run is the default's
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert walls_fit.allocator_of({}) == "default"
    assert walls_fit.allocator_of({"cuda_allocator": {"env": env, "expandable_segments": None}}) == "expandable"
    assert walls_fit.allocator_of({"cuda_allocator": {"env": env, "expandable_segments": False}}) == "default"
    assert walls_fit.allocator_of({"cuda_allocator": {"env": {}, "expandable_segments": True}}) == "expandable"
    run9 = {walls_fit.EXPANDABLE_RUNS[0]["run"].relative_to(REPO).as_posix()}
    assert not {r["record"] for r in walls_fit.rows() if r["record"].startswith(tuple(run9))}


def test_under_expandable_segments_the_walls_ask_at_or_over_the_driver_and_below_the_default_allocators(walls_fit):
    # every record of the ninth run (every process with expandable segments), asked as a machine whose
    # cuda_allocator is expandable_segments asks: at or over what its driver saw (in-sample: the facts were fitted
    # on these); and the generator at 512 px is asked below what the default allocator's process held in the
    # eighth run (16.857 GiB, generate D), the setting's point
    run = walls_fit.EXPANDABLE_RUNS[0]
    inn, held = walls_fit.expandable_rows(run)
    assert len(inn) >= 10 and len(held) >= 9 and {r["kind"] for r in inn} == set(walls_fit.KINDS)
    exp = asks.for_allocator(FACTS, "expandable_segments")
    judged = [r for run10 in walls_fit.EXPANDABLE_JUDGED for r in walls_fit.judged_rows(run10)]
    assert len(judged) >= 3  # the tenth run's, judged by the facts committed before it (its models-before.yaml)
    for row in inn + held + judged:
        ask, source = walls_fit.asked_gib(row, exp)
        assert ask >= row["nvml"], (row["record"], row["key"], ask, row["nvml"], source)
    gen = {"backend": "omnigen2", "precision": "bf16", "size": 512, "device": "cuda"}
    run8_d = json.loads((REPO / "bench/results/gpu-run-h200-2026-12-03-run8/sizing/results/provenance/generate/D.json")
                        .read_text())
    assert asks.generator_ask(exp, gen).vram.value < run8_d["nvml_peak_gib"] < asks.generator_ask(FACTS, gen).vram.value


def test_the_held_out_sets_file_lists_what_each_runs_records_hold_and_the_next_set(walls_fit):
    # bench/results/heldout.yaml: each run's `configurations` are its probe records' (a reader sees the set without
    # opening them), every run is there once, and the next set has no records yet and sizing_gpu.py calls to make them
    import yaml

    data = yaml.safe_load(walls_fit.RUNS_FILE.read_text())

    def text(r):
        return f"{r['key']} ({', '.join(f'{k} {v}' for k, v in r['config'].items())})"

    entries = [e for e in data["heldout"] if not e.get("next")]
    assert [e["name"] for e in entries] == [r["name"] for r in walls_fit.HELDOUT_RUNS]
    assert len({e["id"] for e in data["heldout"]}) == len(data["heldout"])
    for e, run in zip(entries, walls_fit.HELDOUT_RUNS):
        assert e["configurations"] == [text(r) for r in walls_fit.probe_rows(run["folders"], sample="held out")], e["id"]
        assert run["models_before"].exists() and re.fullmatch(r"[0-9a-f]{7,40}", e["commit"]), e["id"]
    for e, run in zip(data["expandable"]["fitted"] + data["expandable"]["judged"],
                      walls_fit.EXPANDABLE_RUNS + walls_fit.EXPANDABLE_JUDGED):
        assert e["configurations"] == [text(r) for r in walls_fit.probe_rows(
            run["heldout"], sample="held out", allocator="expandable")], e["id"]
    (nxt,) = [e for e in data["heldout"] if e.get("next")]
    assert nxt is walls_fit.NEXT_HELDOUT or nxt == walls_fit.NEXT_HELDOUT
    assert "records" not in nxt and nxt["calls"] and all(isinstance(a, str) for call in nxt["calls"] for a in call)
    assert len(nxt["configurations"]) == sum(len(a.split()) for call in nxt["calls"] for a in call if a.count(":") >= 2)


@pytest.mark.parametrize("name", ["third", "fourth", "fifth", "sixth", "seventh", "eighth", "eighteenth", "nineteenth",
                                  "twentieth", "twenty-first", "twenty-first (extra)",
                                  "twenty-third", "twenty-fifth"])
def test_the_held_out_probes_are_judged_by_facts_fitted_without_them_and_each_is_in_the_table(walls_fit, name):
    # each GPU run's held-out probes: the facts it was asked with (models-before.yaml, its commit's models.yaml)
    # are what the fit gives from the records before it alone, and none of its probes is one of those
    run = next(r for r in walls_fit.HELDOUT_RUNS if r["name"] == name)
    before = asks.load_facts(run["models_before"])["process_overhead"]
    fitted_rows = walls_fit.rows_before(run)
    for r in fitted_rows:
        r["weights"] = walls_fit.weights_of(r)
    # the training context stepped at 384 px from the eighteenth run's facts on (walls_fit.CONTEXT_STEPS)
    stepped = "context_step" in before["training"]
    refit = walls_fit.fit(fitted_rows, walls_fit.CONTEXT_STEPS) if stepped else walls_fit.fit(fitted_rows)
    keys = ("allocator_reserve", "activations_reserve", "cuda_context_gib") + (("context_step",) if stepped else ())
    assert {k: {x: refit[k][x] for x in keys if x in refit[k]} for k in refit} == {k: before[k] for k in refit}
    held = walls_fit.heldout_rows(run)
    assert len(held) >= 4 and not {r["record"] for r in fitted_rows} & {r["record"] for r in held}
    assert not {walls_fit._conf_id(r) for r in fitted_rows} & {walls_fit._conf_id(r) for r in held}
    table = walls_fit.TABLE.read_text().split(f"## Held out: the {name} run", 1)[1].split("\n## ", 1)[0]
    assert all(walls_fit._label(r["record"]) in table for r in held)


def test_no_committed_gpu_record_held_more_host_memory_than_its_ram_ask(walls_fit):
    rows = [r for r in walls_fit.rows() if r.get("rss") is not None]
    assert len(rows) >= 40 and any(r["key"].startswith("generator/qwen_image_edit_plus") for r in rows)
    for row in rows:
        ram = walls_fit.asked(row).ram
        assert ram.value >= row["rss"], (row["record"], row["key"], ram.value, row["rss"], ram.source)


def test_the_bounded_form_covers_every_record_with_a_capped_slack_and_caps_a_larger_pass(walls_fit):
    # slack 0.1 GiB over 0.5 of activations, 0.2 over 2.5: with no allocator reserve, 0.2 a GiB of activations
    # covers both and the cap is the larger slack; a pass of 10.5 GiB then gets the cap, not 2.1
    rows = [{"kind": "detector", "sample": "in-sample", "allocated": a, "weights": 9.5, "reserved": a + slack,
             "nvml": a + slack + 0.7} for a, slack in ((10.0, 0.1), (12.0, 0.2))]
    fitted = walls_fit.fit_bounded(rows + [{**r, "kind": k} for k in walls_fit.KINDS if k != "detector" for r in rows],
                                   {k: 0.7 for k in walls_fit.KINDS})["detector"]
    assert fitted == {"allocator_reserve": 0.0, "activations_reserve": 0.2, "slack_cap_gib": 0.2,
                      "cuda_context_gib": 0.7}
    assert walls_fit.bounded_gib({"allocated": 20.0, "weights": 9.5}, fitted) == pytest.approx(20.0 + 0.2 + 0.7)
    assert walls_fit.model_gib({"allocated": 20.0, "weights": 9.5}, fitted) == pytest.approx(20.0 + 2.1 + 0.7)


def test_a_scorer_probe_is_judged_by_the_instruction_its_question_quoted(walls_fit, tmp_path, monkeypatch):
    conf = {"question": "SC", "images": 2, "resolution": 512, "peak_vram_gib": 7.0, "nvml_process_gib": 7.9}
    rec = {"component": "scorer", "precision": "nf4", "key": "scorer/qwen3_vl_8b/nf4", "configurations": [conf]}
    (tmp_path / "said.json").write_text(json.dumps({**rec, "instruction": "Ink."}))
    (tmp_path / "unsaid.json").write_text(json.dumps(rec))  # the records before it name none
    monkeypatch.setattr(walls_fit, "REPO", tmp_path)  # records are named relative to the repository
    rows = {r["record"]: r for r in walls_fit.probe_rows([tmp_path])}
    said, unsaid = (walls_fit.asked_gib(rows[n])[1] for n in ("said.json", "unsaid.json"))
    assert "instruction 4 bytes)" in said and "instruction 1024 bytes (the longest allowed)" in unsaid


def test_the_walls_history_quotes_the_held_out_figures_as_the_table_prints_them(walls_fit):
    text = walls_fit.TABLE.read_text()
    quoted = [line[2:] for line in text.splitlines() if line.startswith("- held-out configurations")]
    assert len(quoted) == len(walls_fit.HELDOUT_RUNS) + len(walls_fit.EXPANDABLE_RUNS) + len(
        walls_fit.EXPANDABLE_JUDGED), quoted
    # docs/walls-history.md's table: one row per summary line, in its order, every figure as the line has it
    rows = walls_fit.heldout_table_rows(text)
    lines = HISTORY_DOC.read_text().splitlines()
    assert len(rows) == len(quoted) and rows == [line for line in lines if line.startswith("| ") and (
        " | default | " in line or " | expandable segments" in line)], rows
    for row, q in zip(rows, quoted):  # the row says what its line says: the run, the count, both ranges
        run, figures = q.removeprefix("held-out configurations (").split(" run", 1)
        count, ranges = figures.split(": ", 1)[1].split(", ", 1)[0], re.findall(r"from (\S+) to (\S+?)[;]?(?: |$)", q)
        assert row.startswith(f"| {run} |") and f"| {count} |" in row and [
            f"{lo} to {hi}" in row for lo, hi in ranges] == [True, True], (row, q)
    readme = " ".join(lines)  # the page's summary of them, then each run's account
    # and the two overhead forms, each fitted on the records before a run, on that run's held-out probes
    bounded = [line[2:] for line in walls_fit.TABLE.read_text().splitlines() if "; bounded " in line]
    measured = readme
    assert len(bounded) == len(walls_fit.HELDOUT_RUNS) and all(q in measured for q in bounded), bounded
    # and the forms judged the same way: the two tighter ones the walls did not take (an NF4 offset, an envelope per
    # reference count), the reserve by references they took and the floor under it; their summary lines as the table
    # has them
    table = walls_fit.TABLE.read_text().splitlines()
    forms = [line[2:] for line in table if line.startswith(("- all: ", "- one reserve per kind:",
                                                              "- a reserve per reference count:"))]
    assert len(forms) == 5 and all(q in measured for q in forms), forms
    assert [q for q in forms if q.startswith("all: without the reserve by references")]
    assert [q for q in forms if q.startswith("all: without the floor")]
    # the page's count of held-out runs is the table's (the twenty-first's extra probes are not a run of their own)
    runs = {re.sub(r" \(extra\)$", "", row.split(" | ")[0][2:]) for row in rows}
    words = ("thirty-six", "thirty-seven", "thirty-eight", "thirty-nine", "forty", "forty-one", "forty-two")
    assert f"**Held out**: {words[len(runs) - 36]} GPU runs" in readme, len(runs)
    # and its sentence on the runs since the floor: the count, the range and the two tallies as the table sums them
    ((n, lo, hi, below, over),) = re.findall(
        r"^- since the floor, OmniGen2, LoRA and scorer configurations, [^:]*: (\d+), wall ask/NVML - 1 from (\S+) to "
        r"(\S+); below the driver: (\d+); over \+10%: (\d+);", walls_fit.TABLE.read_text(), re.M)
    tallies = "none below, none over +10%" if below == over == "0" else f"{below} below, {over} over +10%"
    assert (f"asked their {n} OmniGen2, LoRA and scorer configurations {lo} to {hi} of the driver: {tallies}"
            in readme), (n, lo, hi, below, over)
    # the record count the page gives today's fit is the table's
    (n,) = re.findall(r"^- in-sample records: (\d+),", walls_fit.TABLE.read_text(), re.M)
    said = re.findall(r"today's fit: (\d+) records|every one of the (\d+) committed GPU records", measured)
    assert len(said) == 2 and {a or b for a, b in said} == {n}, (said, n)
    # and its detector sentence: the thirty-sixth's 26 images a call, then the first calls held out after the change
    sections = re.split(r"^## ", text, flags=re.M)

    def detector(ordinal: str) -> list[tuple[int, str]]:
        (sec,) = [x for x in sections if x.startswith(f"Held out: the {ordinal} (H100) run's")]
        return [(int(re.search(r"images_per_call (\d+)", line)[1]), line.split("|")[11].strip())
                for line in sec.splitlines() if line.startswith("| detector |")]

    after = detector("thirty-eighth") + detector("thirty-ninth")
    images, asked = sorted(n for n, _ in after), sorted(a for _, a in after)
    assert len(after) == 8 and (f"asked eight first calls of {images[0]} to {images[-1]} images {asked[0]}-{asked[-1]}"
                                in readme), after
    assert f"(26 images a call {dict(detector('thirty-sixth'))[26]})" in readme
    # and the RAM wall's count and range (it said 233 records for three sessions after the table counted more)
    ((n, lo, hi),) = re.findall(r"^- records with a peak RSS: (\d+), RAM ask/peak RSS from (\S+) to (\S+);",
                                walls_fit.TABLE.read_text(), re.M)
    assert re.findall(r"peak RSS is above its RAM ask \((\d+) records, ask/RSS (\S+)-(\S+?),", measured) == [
        (n, lo, hi)], (n, lo, hi)


def test_the_walls_history_names_the_commit_of_every_committed_gpu_run_record():
    """What covers the default generator: docs/walls-history.md's list of the GPU runs' commits is every commit their
    records name (a run's records name its commit; one the list leaves out is a run the page does not admit to)."""
    named = set()
    for path in (REPO / "bench" / "results").glob("gpu-run-*/**/*"):  # H200 runs and the H100 one
        if path.is_file() and path.suffix in (".json", ".jsonl"):
            named |= {c[:7] for c in re.findall(r'"commit": "([0-9a-f]{40})"', path.read_text(errors="replace"))}
    text = HISTORY_DOC.read_text()
    paragraph = text[text.index("**What covers the default generator"):text.index("## The held-out runs, one by one")]
    assert len(named) > 20 and named <= set(re.findall(r"\b[0-9a-f]{7}\b", paragraph)), sorted(
        named - set(re.findall(r"\b[0-9a-f]{7}\b", paragraph)))


def test_the_gpu_run_table_puts_each_jobs_ask_beside_what_the_driver_saw_and_flags_any_below(tmp_path, gpu_table):
    prov = tmp_path / "run" / "sizing" / "results" / "provenance"
    (prov / "generate").mkdir(parents=True)
    (prov / "fit").mkdir()
    gpu = {"driver": "580.159.04", "gpus": [{"name": "NVIDIA H200"}]}
    (prov / "generate" / "A.json").write_text(json.dumps({
        "rule": "generate", "wildcards": {"condition": "A"}, "resources": {"vram_mb": 10240, "profile": "pod"},
        "peak_vram_gib": 9.0, "peak_reserved_gib": 9.5, "nvml_peak_gib": 10.24, "wall_seconds": 40.0, "gpu": gpu,
        "packages": {"torch": "2.11.0"}, "code": {"commit": "0123456789", "dirty": False},
        "timing": {"load_seconds": 12.5, "view_seconds": [9.0, 7.0]}}))
    (prov / "fit" / "A.json").write_text(json.dumps({"rule": "fit", "wildcards": {"source": "A"},
                                                     "resources": {"vram_mb": 0}, "wall_seconds": 1.0}))
    # the forecast's source as the plan writes it from a probe (the twenty-fourth run's generator probe, load 18.993 s)
    probes = tmp_path / "probed" / "results" / "probe" / "h200"
    probes.mkdir(parents=True)
    probe = RUN24 / "sizing" / "results" / "probe" / "h200" / "generator.json"
    probes.joinpath("generator.json").write_text(probe.read_text())
    _, _, source = asks.Measurements.load(tmp_path / "probed", measured_key).timing(
        "generator/omnigen2/bf16/512", "h200", references=1)
    (tmp_path / "run" / "plan-before.json").write_text(json.dumps(
        {"jobs": [{"rule": "generate", "wildcards": {"condition": "A"}, "seconds": 50.0, "seconds_source": source}]}))
    text = gpu_table.table(tmp_path / "run")
    row = next(line for line in text.splitlines() if line.startswith("| generate"))
    assert row == ("| generate | condition=A | 10.000 | 9.000 | 9.500 | 10.240 | 0.977 | 50.000 | 40.000 | 1.250 | "
                   "18.993 | 12.500 | NVIDIA H200 | 580.159.04 | 2.11.0 | 0123456 |")
    assert "| fit " not in text  # a CPU job has no wall on a card
    assert "GPU jobs: 1; asked below what the driver saw: 1 (generate condition=A)" in text


# ------------------------------------------- the whole DAG on the H200 (bench/gpu_run.sh, 2026-12-02)
GPU_RUN = REPO / "bench" / "results" / "gpu-run-h200-2026-12-02"


@pytest.fixture(scope="module")
def gpu_table():
    return _bench("gpu_table")


CAP24_RUN = REPO / "bench" / "results" / "gpu-run-h200-2026-12-02-cap24"
RUN3 = REPO / "bench" / "results" / "gpu-run-h200-2026-12-02-run3"
RUN4 = REPO / "bench" / "results" / "gpu-run-h200-2026-12-02-run4"
RUN5 = REPO / "bench" / "results" / "gpu-run-h200-2026-12-02-run5"
RUN6 = REPO / "bench" / "results" / "gpu-run-h200-2026-12-02-run6"
RUN7 = REPO / "bench" / "results" / "gpu-run-h200-2026-12-03-run7"
RUN8 = REPO / "bench" / "results" / "gpu-run-h200-2026-12-03-run8"
RUN9 = REPO / "bench" / "results" / "gpu-run-h200-2026-12-03-run9"
RUN11 = REPO / "bench" / "results" / "gpu-run-h200-2026-12-03-run11"
RUN15 = REPO / "bench" / "results" / "gpu-run-h200-2026-12-04-run15"
RUN17 = REPO / "bench" / "results" / "gpu-run-h200-2026-12-04-run17"
RUN22 = REPO / "bench" / "results" / "gpu-run-h200-2026-12-04-run22"
RUN24 = REPO / "bench" / "results" / "gpu-run-h200-2026-12-04-run24"
RUN25 = REPO / "bench" / "results" / "gpu-run-h200-2026-12-05-run25"
RUN26 = REPO / "bench" / "results" / "gpu-run-h100-2026-12-05-run26"  # an H100: no H200 was lent that session
RUN46 = REPO / "bench" / "results" / "gpu-run-h100-2026-12-06-run46"  # the whole DAG at 982abfa, on an H100


# what each GPU run did, quoting its tables' summaries; docs/measured.md and docs/walls-history.md point there
GPU_RUNS_DOC = REPO / "bench" / "results" / "gpu-runs.md"
MEASURED_DOC = REPO / "docs" / "measured.md"  # the summary of what was validated
HISTORY_DOC = REPO / "docs" / "walls-history.md"  # the walls' account, run by run


def test_the_measured_pages_point_to_the_gpu_runs_account():
    assert all("`bench/results/gpu-runs.md`" in doc.read_text() for doc in (MEASURED_DOC, HISTORY_DOC))


def _quoted_summary(text: str) -> list[str]:
    return [line[2:] for line in text.split("## Summary\n", 1)[1].splitlines() if line.startswith("- ")]


@pytest.mark.parametrize("run", [GPU_RUN, CAP24_RUN, RUN3, RUN4, RUN5, RUN6, RUN7, RUN8, RUN9, RUN11, RUN15, RUN17,
                                 RUN22, RUN24, RUN26, RUN46],
                         ids=lambda p: p.name)
def test_the_committed_gpu_run_table_regenerates_from_its_records_and_the_readme_quotes_its_summary(gpu_table, run):
    text = gpu_table.table(run)
    assert text == (run / "table.md").read_text()
    quoted = _quoted_summary(text)
    runs = GPU_RUNS_DOC.read_text()
    assert len(quoted) == 5 and all(q in runs for q in quoted), [q for q in quoted if q not in runs]


# docs/walls-history.md's whole-DAG figures ("In short"): a run's asks by its ordinal and commit, its forecasts by its
# ordinal
_README_DAG_ASKS = {RUN11: "eleventh", RUN24: "twenty-fourth", RUN26: "twenty-sixth", RUN46: "forty-sixth"}
_README_FORECASTS = {RUN7: "seventh", RUN11: "eleventh", RUN15: "fifteenth", RUN17: "seventeenth",
                     RUN22: "twenty-second", RUN24: "twenty-fourth", RUN26: "twenty-sixth", RUN46: "forty-sixth"}


def test_the_walls_history_quotes_the_whole_dag_runs_figures_as_their_tables_print_them(gpu_table, walls_fit):
    readme = " ".join(HISTORY_DOC.read_text().split())

    def cents(x: float) -> decimal.Decimal:  # two decimals, rounded half up from the record's three, as written
        return decimal.Decimal(f"{x:.3f}").quantize(decimal.Decimal("0.01"), decimal.ROUND_HALF_UP)

    # each run's table from its records, not the committed table.md; made once, read by several checks below
    tables = {run: gpu_table.table(run) for run in sorted(set(_README_DAG_ASKS) | set(_README_FORECASTS))}
    for run, text in tables.items():
        summary = "\n".join(_quoted_summary(text))
        n, lo, hi = re.search(r"DAG GPU jobs: (\d+), asked/NVML (\S+)-(\S+),", summary).groups()
        if run in _README_DAG_ASKS:
            commit = text.split("\n|---", 1)[1].splitlines()[1].split("|")[-2].strip()
            at = readme.find(f"{_README_DAG_ASKS[run]} ({commit}")
            assert at >= 0, (run.name, commit)
            sentence = readme[at:readme.index(". ", at)]
            assert f"{lo}-{hi}" in sentence and re.search(rf"\b(all|its) {n} ", sentence), (run.name, sentence)
        if run in _README_FORECASTS:
            within, of = re.search(r"within 20% of actual: (\d+) of (\d+) jobs", summary).groups()
            flo, fhi = re.search(r"forecast from a probe: (\S+)-(\S+) \(", summary).groups()
            m = re.search(rf"\b{within} of {of}(?: jobs)? in the {_README_FORECASTS[run]}\b", readme)
            assert m, (run.name, within, of)
            if readme[m.end():].startswith((" (", " run (")):  # the range, where the README gives one
                assert f"{flo}-{fhi}" in readme[m.end():readme.index(")", m.end())], (run.name, flo, fhi)
            else:
                assert run in (RUN7, RUN11, RUN15, RUN17, RUN22), run.name
    # "It has run forty-seven times ... the last twenty-two an H100": the committed run folders
    def words(n: int) -> str:
        ones = "one two three four five six seven eight nine".split()
        teens = "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
        tens = "twenty thirty forty fifty sixty seventy eighty ninety".split()
        return (ones[n - 1] if n < 10 else teens[n - 10] if n < 20
                else tens[n // 10 - 2] + (f"-{ones[n % 10 - 1]}" if n % 10 else ""))

    folders = [f for f in (REPO / "bench" / "results").glob("gpu-run-h*") if not f.name.endswith("-repeat")]
    every = {walls_fit.run_ordinal(f"{f.relative_to(REPO)}/") for f in folders}
    h100 = {walls_fit.run_ordinal(f"{f.relative_to(REPO)}/") for f in folders if f.name.startswith("gpu-run-h100")}
    assert every == set(range(1, max(every) + 1)) and h100 == set(range(min(h100), max(every) + 1)), (every, h100)
    assert (f"It has run {words(max(every))} times" in readme and f"the last {words(len(h100))} an H100" in readme
            and words(47) == "forty-seven" and words(22) == "twenty-two" and words(13) == "thirteen"), (every, h100)
    # "every DAG job of every run was asked at or above what the driver saw, except two in the third and three in the
    # twenty-second (c4b8144): ... asked 0.979-0.988": every committed run table's count, and those jobs' range
    below = {}
    for table in sorted((REPO / "bench" / "results").glob("gpu-run-h*/table.md")):
        (k,) = re.findall(r"^- DAG GPU jobs: \d+, asked/NVML \S+, below 1: (\d+)$", table.read_text(), re.M)
        if k != "0":
            below[table.parent] = int(k)
    assert below == {RUN3: 2, RUN22: 3}, below
    assert "asked at or above what the driver saw, except two in the third and three in the twenty-second" in readme
    asked = sorted(float(line.split("|")[7]) for line in tables[RUN22].splitlines()
                   if line.startswith("| ") and line.split("|")[7].strip().replace(".", "").isdigit()
                   and float(line.split("|")[7]) < 1)
    assert len(asked) == 3 and f"asked {asked[0]:.3f}-{asked[-1]:.3f} of the driver" in readme, asked
    # the one forecast outside 20% in the twenty-fourth: the text encoder's probe loads, first pass then second
    loads = [json.loads(f.read_text())["load_seconds"] for f in (
        RUN24 / "probe_warmup" / "results" / "h200" / "text_encoder.json",
        RUN24 / "sizing" / "results" / "probe" / "h200" / "text_encoder.json")]
    assert f"whose probe loaded in {loads[0]:.1f} s and then {loads[1]:.1f})" in readme, loads
    # "the same jobs ask ... with today's facts": the walls table's in-sample asks of those three jobs
    today = sorted(line.split("|")[12].strip() for line in walls_fit.TABLE.read_text().splitlines()
                   if "| gpu-run-h200-2026-12-04-run22:generate/" in line and "| in-sample |" in line)
    assert len(today) == 3 and f"the same jobs ask {today[0]}-{today[-1]} with today's facts" in readme, today
    # "the same jobs run twice on one machine moved by 0.878-1.129 (sixth)": the repeat table's wall first/second
    repeat = RUN6.with_name(RUN6.name + "-repeat")
    ((lo, hi),) = re.findall(r"wall first/second (\S+)-(\S+?);", (repeat / "repeat.md").read_text())
    assert f"twice on one machine moved by {lo}-{hi} (sixth)" in readme, (lo, hi)
    # "no run had a false admit; two had a false refusal": every committed 24 GiB matrix's counts
    admits = refusals = 0
    for cap in (REPO / "bench" / "results").glob("gpu-run-h*/cap24.md"):
        text = cap.read_text()
        admits += int(re.search(r"^- admitted, failed under the cap \(false admits\): (\d+)$", text, re.M)[1])
        refusals += int(re.search(r"^- refused, completed under the cap \(false refusals\): (\d+)$", text, re.M)[1])
    assert (admits, refusals) == (0, 2) and "no run had a false admit; two had a false refusal" in readme
    # "the same keypoints job loaded in 7.45-12.11 s over six jobs of one run": the twenty-fourth's load actual column
    head, *rows = [line.split("|")[1:-1] for line in tables[RUN24].splitlines() if line.startswith("| ")]
    col = [c.strip() for c in head].index("load actual s")
    loads = sorted(float(r[col]) for r in rows if r[0].strip().startswith("keypoints"))
    assert len(loads) == 6 and f"keypoints job loaded in {loads[0]:.2f}-{loads[-1]:.2f} s over six jobs" in readme, loads
    # the warm-up gate in the twenty-fourth: the plan's warm-ups against the jobs' first items over their later ones
    plan = json.loads((RUN24 / "plan-before.json").read_text())["jobs"]
    warm = {j["rule"]: re.search(r"warm-up (\S+) s", j["seconds_source"])[1] for j in plan
            if j["rule"] in ("generate", "keypoints")}
    done = RUN24 / "sizing" / "results"
    views = [json.loads((done / "generate" / c / "views.json").read_text())["views"] for c in "ABCD"]
    firsts = sorted(cents(v[min(v, key=int)]["seconds"] - v[max(v, key=int)]["seconds"]) for v in views)
    images = [json.loads(f.read_text())["timing"]["image_seconds"] for f in (done / "provenance").glob("keypoints*/**/*.json")]
    over = sorted(cents(t[0] - sum(t[1:]) / len(t[1:])) for t in images)
    assert len(firsts) == 4 and len(over) == 6 and (
        f"(the generator's {warm['generate']} s against first views {firsts[0]}-{firsts[-1]} s over the second; the "
        f"detector's {warm['keypoints']} s against {over[0]}-{over[-1]} s)") in readme, (warm, firsts, over)
    # the load spreads: the detector's and the generator's probes under each allocator (alloc_ab), two decimals
    for run, component, said in ((RUN24, "detector/", "its probe loaded in {}-{} s under the default allocator and "
                                  "{}-{} s under expandable segments"),
                                 (RUN25, "generator/", "The generator's loaded in {}-{} s and {}-{} s (default; "
                                  "expandable segments)")):
        (line,) = [q for q in _quoted_summary((run / "alloc_ab.md").read_text()) if q.startswith(component) and "load s" in q]
        spans = re.findall(r"(?:default|segments) (\S+)-(\S+) \(", line)
        assert said.format(*(cents(float(x)) for span in spans for x in span)) in readme, line
    # the HEF export at the real shape: the runs that made one, and its census, parameters and parity as each recorded
    exports = {}
    for record in (REPO / "bench" / "results").glob("gpu-run-h*/sizing/results/hef/rfdetr-keypoint.export.json"):
        rec = json.loads(record.read_text())
        exports[walls_fit.run_ordinal(str(record.relative_to(REPO)))] = (
            rec["export"]["optimizer"]["nodes_before"], rec["census"]["nodes"], rec["census"]["operator_types"],
            rec["parameters"]["device_half"], rec["parameters"]["whole_model"], f"{rec['parity']['max_abs_diff']:.2e}")
    assert sorted(exports) == [2, 3, 4, 5, 6, 8, 11, 24, 46] and "The HEF export ran in the second to sixth, the eighth, " \
        "the eleventh, the twenty-fourth and the forty-sixth runs at the real shape" in readme, sorted(exports)
    ((before, nodes, types, half, whole, parity),) = set(exports.values())
    assert (f"it gave {before} -> {nodes} nodes and {types} operator types, parameters {half:,} / {whole:,}, and parity "
            f"{parity} against the 1e-4 threshold") in readme, (before, nodes, types, half, whole, parity)


def test_the_account_quotes_the_same_jobs_twice_table():
    # the sixth run's repeat pass (bench/gpu_run.sh repeat): each job's seconds against its first pass's; the script
    # that made the table left the tree (bench/results/README.md), the committed table is the record
    repeat = RUN6.with_name(RUN6.name + "-repeat")
    text = (repeat / "repeat.md").read_text()
    (line,) = _quoted_summary(text)
    assert line.startswith("jobs run twice: 6;") and line in GPU_RUNS_DOC.read_text()


@pytest.mark.parametrize("run, component", [(RUN24, "detector/"), (RUN25, "generator/")], ids=["run24", "run25"])
def test_the_account_quotes_the_allocator_a_b_tables_lines(run, component):
    # the twenty-fourth run's alloc_ab (the detector's) and the twenty-fifth's (the generator's): the same probes,
    # each allocator in turn, each in its own process; the committed tables (their script left the tree)
    text = (run / "alloc_ab.md").read_text()
    quoted = [q for q in _quoted_summary(text) if q.startswith(component)]
    assert len(quoted) == 4 and all(q in GPU_RUNS_DOC.read_text() for q in quoted)


@pytest.mark.parametrize("run", [CAP24_RUN, RUN3, RUN4, RUN5, RUN6, RUN7, RUN8, RUN9, RUN11, RUN24, RUN46],
                         ids=lambda p: p.name)
def test_the_committed_24_gib_matrix_regenerates_from_its_records_and_the_readme_quotes_it(run):
    cap24 = _bench("cap24_matrix")
    text = cap24.matrix(run)
    assert text == (run / "cap24.md").read_text()
    runs = GPU_RUNS_DOC.read_text()
    assert all(q in runs for q in _quoted_summary(text)), [q for q in _quoted_summary(text) if q not in runs]


def test_the_24_gib_matrix_counts_a_job_the_desk_admits_that_fails_under_the_cap_as_a_false_admit(tmp_path):
    cap24 = _bench("cap24_matrix")
    run = tmp_path / "run"
    prov = run / "sizing" / "results" / "provenance" / "generate"
    prov.mkdir(parents=True)
    job = {"rule": "generate", "wildcards": {"condition": "A"}, "verdict": "fits", "refused_walls": [], "vram_gib": 17.5}
    (run / "plan-before-desk.json").write_text(json.dumps({"jobs": [job, {**job, "wildcards": {"condition": "B"}}]}))
    refused = {**job, "rule": "lora_train", "wildcards": {}, "verdict": "REFUSED: video memory", "vram_gib": 27.8,
               "refused_walls": [{"wall": "video memory"}]}
    (run / "cap24-refused-plan.json").write_text(json.dumps({"jobs": [refused]}))
    (run / "cap24-refused.log").write_text("Error in rule lora_train:\ntorch.OutOfMemoryError: CUDA out of memory.\n")
    (prov / "A.json").write_text(json.dumps({"rule": "generate", "wildcards": {"condition": "A"}, "vram_cap_gib": 24.0,
                                             "vram_cap_applied": True, "nvml_peak_gib": 16.9, "peak_vram_gib": 15.4,
                                             "peak_rss_mib": 8535.0}))
    counts = cap24.counts(cap24.rows(run))  # B was admitted and left no record: it did not complete under the cap
    assert counts["admitted, completed under the cap"] == 1
    assert counts["admitted, failed under the cap (false admits)"] == 1
    assert counts["refused, out of memory under the cap"] == 1
    # but a job that failed for another reason (its error block names it), or that Snakemake never started after
    # that failure, has no verdict to judge: neither is a false admit
    c = {**job, "wildcards": {"condition": "C"}}
    (run / "plan-before-desk.json").write_text(json.dumps({"jobs": [job, {**job, "wildcards": {"condition": "B"}}, c]}))
    (run / "cap24-admitted.log").write_text(
        "Error in rule generate:\n    jobid: 3\nLogfile logs/generate/B.log:\nfourloops INFO rule generate wildcards "
        "{'condition': 'B'}\nModuleNotFoundError: No module named 'omnigen2'\nExiting because a job execution failed.\n")
    got = {r["job"]: r["under the cap"] for r in cap24.rows(run) if r["rule"] == "generate"}
    assert got == {"condition=A": "completed", "condition=B": "failed (not memory)",
                   "condition=C": "not run (the run stopped first)"}
    counts = cap24.counts(cap24.rows(run))
    assert counts["admitted, failed under the cap (false admits)"] == 0
    assert counts["admitted, failed under the cap for another reason or not started: no verdict"] == 2
    # a log that ends mid-run (no "exit N": the machine went away) leaves its unstarted jobs without a verdict too;
    # once the run ended ("exit 0"), a job with no record and no error is counted against the walls
    (run / "cap24-admitted.log").write_text("localrule generate:\n")
    got = {r["job"]: r["under the cap"] for r in cap24.rows(run) if r["rule"] == "generate"}
    assert got["condition=C"] == cap24.CUT and cap24.counts(cap24.rows(run))[
        "admitted, failed under the cap (false admits)"] == 0
    (run / "cap24-admitted.log").write_text("localrule generate:\nexit 0\n")
    assert cap24.counts(cap24.rows(run))["admitted, failed under the cap (false admits)"] == 2
    # a job's ask is what the capped run's Snakemake scheduled it with (its walls under its own allocator: the
    # eleventh run's jobs were asked with expandable segments, the plan beside it by the desk's default), where its
    # log says; else the plan's
    (run / "cap24-admitted.log").write_text("localrule generate:\n    wildcards: condition=A\n    resources: "
                                            "tmpdir=/tmp, profile=desk, vram_mb=16374, mem_mb=11663\nexit 0\n")
    got = {r["job"]: r["asked GiB"] for r in cap24.rows(run) if r["rule"] == "generate"}
    assert got["condition=A"] == 15.99 and got["condition=B"] == 17.5


@pytest.mark.parametrize("run", [GPU_RUN, RUN3], ids=lambda p: p.name)
@pytest.mark.parametrize("component", ["omnigen2", "scorer"])
def test_a_sizing_build_on_the_card_asks_what_the_driver_saw_of_it_on_the_h200(component, run):
    from fourloops.stage import AskContext
    from fourloops.declarations import sizing

    seen = json.loads((run / "sizing" / "results" / "provenance" / "sizing_model" / f"{component}.json").read_text())
    ask = sizing.ask(AskContext(FACTS), {"component": component}, {"device": "cuda"})
    assert ask.vram.value >= seen["nvml_peak_gib"], (ask.vram.value, seen["nvml_peak_gib"], ask.vram.source)
    assert sizing.ask(AskContext(FACTS), {"component": component}, {"device": "cpu"}).vram.value == 0.0


def test_the_warm_up_rule_tells_a_machines_first_probe_pass_from_its_second_on_the_committed_records():
    # the probes run twice on one machine (the thirteenth to fifteenth H200 runs): each first pass compiled what its
    # second found made, and each second pass's Triton cache grew a little all the same
    from fourloops.asks import compiled_once

    def caches(path):
        return json.loads((REPO / "bench" / "results" / path).read_text())["kernel_caches"]

    run13, run14, run15 = ("gpu-run-h200-2026-12-03-run13", "gpu-run-h200-2026-12-04-run14",
                           "gpu-run-h200-2026-12-04-run15")
    first = [f"{run}/probe_warmup/results/h200/{c}.json" for run in (run13, run14, run15) for c in ("generator", "detector")]
    first += [f"{run}/probe_warmup/results/h200/scorer.json" for run in (run13, run14)]
    second = [f"{run14}/call1/sizing/results/probe/h200/generator.json"]
    second += [f"{run15}/sizing/results/probe/h200/{c}.json" for c in ("generator", "detector")]
    assert all(compiled_once(caches(p)) for p in first), [p for p in first if not compiled_once(caches(p))]
    assert not any(compiled_once(caches(p)) for p in second), [p for p in second if compiled_once(caches(p))]
    assert all(caches(p)["grew"] for p in second[:2])  # what the rule read before: both second passes "grew"
    # and the fifteenth run's plan would now take the generator's warm-up from its second pass's first configuration
    from fourloops.stage import measured_key

    got = asks.Measurements.load(REPO / "bench" / "results" / run15 / "sizing", measured_key).timing(
        "generator/omnigen2/bf16/512", "h200", references=1)
    assert got is not None and "warm-up 2.79 s (first configuration's" in got[2], got


def test_a_probe_times_a_job_with_its_load_its_first_items_warm_up_and_its_process_start_once(tmp_path):
    from fourloops.stage import measured_key

    probe = tmp_path / "results" / "probe" / "h200" / "detector.json"
    probe.parent.mkdir(parents=True)
    probe.write_text(json.dumps({"key": "detector/x", "machine_name": "h200", "load_seconds": 10.0,
                                 "apparatus_seconds": 2.0, "configurations": [
        {"images_per_call": 1, "seconds_per_item": 1.0, "first_item_seconds": 4.0, "items": [{"seconds": 4.0}, {"seconds": 1.0}]},
        {"images_per_call": 4, "seconds_per_item": 3.0, "first_item_seconds": 3.5, "items": [{"seconds": 3.5}, {"seconds": 3.0}]}]}))
    prov = tmp_path / "results" / "provenance" / "probe" / "h200-detector.json"
    prov.parent.mkdir(parents=True)
    prov.write_text(json.dumps({"rule": "probe_model", "wall_seconds": 30.0, "wildcards": {},
                                "outputs": [{"path": "results/probe/h200/detector.json", "bytes": 1, "sha256": "0"}]}))
    once, per, source = asks.Measurements.load(tmp_path, measured_key).timing("detector/x", "h200", images_per_call=4)
    # load 10 + the smallest first-item excess (3.5 - 3, not the first configuration's 4 - 1) + the rest of its
    # 30 s less the probe's own record (2 s the job never spends): 30 - 10 - 11.5 - 2 = 6.5
    assert (once, per) == (10.0 + 0.5 + 6.5, 3.0) and "warm-up 0.5 s (smallest over configurations) + process 6.5 s" in source
    # a probe that compiled no kernel (its caches did not grow): its first configuration's excess is a fresh
    # process's warm-up, as a job's (4 - 1); one whose caches grew keeps the floor
    for grew, warm in ((False, 3.0), (True, 0.5)):
        probe.write_text(json.dumps({**json.loads(probe.read_text()), "kernel_caches": {"grew": grew}}))
        once, _, source = asks.Measurements.load(tmp_path, measured_key).timing("detector/x", "h200")
        assert once == 10.0 + warm + 6.5, (grew, once, source)
    # with the caches' sizes, what grew decides: CUDA's JIT cache growing, or a cache filled from empty, is a
    # one-off compilation (the floor); Triton's filled cache growing is not (every later process wrote some)
    for before, after, warm in (({"cuda_jit": 10.0, "triton": 50.0}, {"cuda_jit": 10.0, "triton": 54.0}, 3.0),
                                ({"cuda_jit": 10.0, "triton": 50.0}, {"cuda_jit": 12.0, "triton": 50.0}, 0.5),
                                ({"cuda_jit": 10.0, "triton": 0.0}, {"cuda_jit": 10.0, "triton": 4.0}, 0.5),
                                ({"cuda_jit": 10.0, "triton": 50.0}, {"cuda_jit": 10.0, "triton": 50.0}, 3.0)):
        caches = {"before_kib": before, "after_kib": after, "grew": after != before}
        probe.write_text(json.dumps({**json.loads(probe.read_text()), "kernel_caches": caches}))
        once, _, source = asks.Measurements.load(tmp_path, measured_key).timing("detector/x", "h200")
        assert once == 10.0 + warm + 6.5, (before, after, once, source)
    # a probe of one configuration (the LoRA step's) that compiled: its only excess, said to be high
    one = json.loads(probe.read_text())
    probe.write_text(json.dumps({**one, "configurations": one["configurations"][1:],
                                 "kernel_caches": {"grew": True}}))
    got = asks.Measurements.load(tmp_path, measured_key).timing("detector/x", "h200")[2]
    assert "warm-up 0.5 s (its one configuration's, with one-off kernel compilation: high)" in got, got
    probe.write_text(json.dumps({**{k: v for k, v in one.items() if k != "kernel_caches"},
                                 "configurations": one["configurations"][1:]}))
    got = asks.Measurements.load(tmp_path, measured_key).timing("detector/x", "h200")[2]
    assert "warm-up 0.5 s (its one configuration's; its record does not say whether it compiled)" in got, got
    probe.write_text(json.dumps({k: v for k, v in one.items() if k != "kernel_caches"}))
    prov.unlink()  # without the probe job's record: no process term, and no guess for it
    once, _, source = asks.Measurements.load(tmp_path, measured_key).timing("detector/x", "h200")
    assert once == 10.5 and "process" not in source
    # a probe that bench/sizing_gpu.py ran outside Snakemake: its own process's wall stands in for the job's
    probe.write_text(json.dumps({**json.loads(probe.read_text()), "process_wall_seconds": 25.0}))
    once, _, source = asks.Measurements.load(tmp_path, measured_key).timing("detector/x", "h200")
    assert once == 10.0 + 0.5 + (25.0 - 10.0 - 11.5 - 2.0) and "process 1.5 s" in source
    # and where it timed its own child's span (imports to record, as a job's wall), that, not its start and teardown
    probe.write_text(json.dumps({**json.loads(probe.read_text()), "child_wall_seconds": 24.0}))
    once, _, source = asks.Measurements.load(tmp_path, measured_key).timing("detector/x", "h200")
    assert once == 10.0 + 0.5 + (24.0 - 10.0 - 11.5 - 2.0) and "process 0.5 s" in source


def test_the_committed_forecast_table_regenerates_and_the_readme_quotes_it():
    environ = dict(os.environ)
    text = _bench("gpu_forecast").table(GPU_RUN)
    # its plan runs in this process for the H200 (cuda_allocator: expandable_segments) and leaves the environment
    # as it found it: torch's variable, set for jobs a dry run never starts, reached every later test's Snakemake
    assert dict(os.environ) == environ
    assert text == (GPU_RUN / "forecast.md").read_text()
    (line,) = [x[2:] for x in text.split("## Summary\n", 1)[1].splitlines() if x.startswith("- ")]
    assert line in GPU_RUNS_DOC.read_text()


def test_a_batch_no_probe_ran_is_read_between_the_probed_calls(tmp_path):
    """A generator probe at 1 and 8 views a call: 6 s a view alone, 3 s a view in a call of 8 (24 s a call). A call
    of 4 is read on the line between the two calls: 6 + (24 - 6) x 3/7 = 13.714 s, 3.4286 s a view; 8 and 12 read
    the call of 8; a probe with no batches gives nothing for a batch."""
    from fourloops.stage import measured_key

    confs = [{"references": 1, "batch": 1, "seconds_per_item": 6.0, "first_item_seconds": 7.0,
              "items": [{"seconds": 7.0}, {"seconds": 6.0}]},
             {"references": 1, "batch": 8, "seconds_per_item": 3.0, "first_item_seconds": 4.0,
              "items": [{"seconds": 32.0}, {"seconds": 24.0}]}]
    for name, rows in (("batched", confs), ("plain", [{k: v for k, v in confs[0].items() if k != "batch"}])):
        path = tmp_path / name / "results" / "probe" / "desk" / "generator.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"key": "generator/omnigen2/bf16/512", "machine_name": "desk", "load_seconds": 10.0,
                                    "configurations": rows}))
    measured = asks.Measurements.load(tmp_path / "batched", measured_key)
    at = {b: measured.timing("generator/omnigen2/bf16/512", "desk", references=1, batch=b) for b in (1, 4, 8, 12)}
    assert at[1][1] == 6.0 and at[8][1] == 3.0 and at[12][1] == 3.0
    assert at[4][1] == pytest.approx(3.4286, abs=1e-4) and "interpolated between the probed calls of 1 and 8" in at[4][2]
    plain = asks.Measurements.load(tmp_path / "plain", measured_key)
    assert plain.timing("generator/omnigen2/bf16/512", "desk", references=1, batch=4) is None
    assert plain.timing("generator/omnigen2/bf16/512", "desk", references=1)[1] == 6.0


def test_a_reference_count_no_probe_ran_is_read_between_the_probed_counts(tmp_path):
    """A generator probe at 1 and 3 references (6 and 9 s a view): 2 references read 7.5 s, on the line between;
    4 references, beyond every probed count, read nothing (the forecast falls back to its estimate). Held out: the
    H100 probe of 1, 2 and 3 references in the whole-DAG run of 2026-12-06, its 2-reference configuration left out
    and read between the other two, within 5% of what that configuration measured (6.346 s)."""
    from fourloops.stage import measured_key

    key = "generator/omnigen2/bf16/512"

    def measured(name, rows):
        path = tmp_path / name / "results" / "probe" / "desk" / "generator.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"key": key, "machine_name": "desk", "load_seconds": 10.0, "configurations": rows}))
        return asks.Measurements.load(tmp_path / name, measured_key)

    synthetic = measured("synthetic", [{"references": r, "seconds_per_item": s, "first_item_seconds": s}
                                       for r, s in ((1, 6.0), (3, 9.0))])
    two = synthetic.timing(key, "desk", references=2)
    assert two[1] == pytest.approx(7.5) and "2 references interpolated between the probed 1 and 3" in two[2]
    assert synthetic.timing(key, "desk", references=4) is None
    run46 = json.loads((REPO / "bench/results/gpu-run-h100-2026-12-06-run46/sizing/results/probe/h200/generator.json")
                       .read_text())
    (held,) = [c for c in run46["configurations"] if c.get("references") == 2]
    rest = measured("run46", [c for c in run46["configurations"] if c.get("references") != 2])
    read = rest.timing(key, "desk", references=2)[1]
    assert abs(read / held["seconds_per_item"] - 1) <= 0.05, (read, held["seconds_per_item"])


def test_a_probe_job_asks_what_its_largest_batch_holds_and_times_the_batch_its_card_fits():
    """The probe rule times one item a call and a batch: the job's ask is the component's at that batch (on an H100 the
    sizing OmniGen2's probe reached 26.74 GiB at 8 views a call, bench/results/batching-h100-2026-12-07/probes, where a
    one-view ask was 16.27 GiB). `auto` is the largest batch up to batching.PROBE_AUTO_MOST whose ask fits the card
    the probe runs on; a number is that many; a scorer under sample decoding takes one question a call."""
    from fourloops import batching, machines
    from fourloops.declarations import probe as probe_decl
    from fourloops.stage import AskContext
    from fourloops.stages.probe import probed_batches

    gen = {**GEN, "batch": "auto"}

    def probe_ask(machine, component, settings):
        return probe_decl.ask(AskContext(FACTS, machine=machine), {"component": component},
                              {"model_set": "sizing", "settings": settings})

    big = probe_ask("h200", "generator", gen)
    assert big.batch == batching.PROBE_AUTO_MOST == 8
    assert big.vram.value == pytest.approx(asks.generator_ask(FACTS, gen, batch=8).vram.value)
    assert big.vram.value > asks.generator_ask(FACTS, gen).vram.value
    card = machines.machine(machines.load(), "desk").vram_gib
    desk = probe_ask("desk", "generator", gen)
    assert 1 < desk.batch < 8 and desk.vram.value <= card < asks.generator_ask(FACTS, gen, batch=desk.batch + 1).vram.value
    assert probe_ask("desk", "generator", {**GEN, "batch": 3}).batch == 3
    assert probed_batches(desk.batch, 64) == [1, desk.batch]  # what the job then times, its batch resource the most
    scorer = {"base": "b", "base_revision": None, "adapter": "a", "adapter_revision": None, "precision": "nf4",
              "device": "cuda", "decoding": "sample", "temperature": 0.7, "max_new_tokens": 512, "batch": "auto"}
    assert probe_ask("h200", "scorer", scorer).batch == 1
    assert probe_ask("h200", "scorer", {**scorer, "decoding": "greedy"}).batch == 8


def test_the_probe_job_times_its_batch_resource_in_place_of_the_settings_auto(monkeypatch):
    from fourloops.stages import probe as probe_stage_mod

    seen = {}

    def fake_probe(component, settings, **kw):
        seen.update(settings)
        return {"key": "k", "load_seconds": 1.0, "pass_seconds": 1.0, "peak_vram_gib": 1.0, "complete": True,
                "precision": "bf16"}

    monkeypatch.setattr(probe_stage_mod, "probe", fake_probe)
    probe_stage_mod.probe_stage("out.json", "desk", "generator", {**GEN, "batch": "auto"}, "sizing", batch=6)
    assert seen["batch"] == 6
    seen.clear()
    probe_stage_mod.probe_stage("out.json", "desk", "lamp", {"vram_gib": 1.0}, "sizing", batch=6)
    assert "batch" not in seen  # a component without a batch knob is probed as configured
