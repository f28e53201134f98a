"""EditScore grades of the restyled views: the scorer's loading, what a real run needs and asks, the gate on an
NF4 grade table, and one smoke sub-DAG (restyle -> grades, beside drift) from the finished smoke ladder."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from conftest import REPO, driver_sees, ink_config, run_snakemake
from fourloops import asks, preflight, scorer as sc
from fourloops.stage import AskContext, stage_for

FACTS = asks.load_facts(REPO / "config" / "models.yaml")


def write_config(path, **grades):
    return ink_config(path, grades={"num_pass": 1} | grades)


@pytest.fixture(scope="module")
def graded(restyled_graded):
    """The finished smoke ladder's workdir, copied, with one style restyled, drifted and graded (2 views): the
    session's sub-DAG (conftest.restyled_graded), shared with tests/test_restyle.py."""
    return restyled_graded


# ----------------------------------------------------------------------------- the smoke sub-DAG
def test_the_random_tiny_scorer_gets_nan_with_the_raw_text_and_the_reason_never_a_number(graded):
    work = graded["work"]
    table = pd.read_csv(work / "results" / "grades" / "ink.csv", keep_default_na=False)
    assert list(table["azimuth"]) == [0, 90] and set(table["model_set"]) == {"smoke"}
    for f in ("prompt_following", "consistency", "perceptual_quality", "overall"):
        assert list(table[f]) == ["NaN", "NaN"], f
    assert all(s != "ok" for s in table["parse_status"])
    assert all("SC pass 0" in r and "PQ pass 0" in r for r in table["reason"])
    assert all(r.startswith("SC pass 0 attempt 0: ") for r in table["raw"])
    assert list(table["attempts"]) == [4, 4]  # SC and PQ, each asked once more (retries 1)
    assert set(table["num_pass"]) == {1} and set(table["score_range"]) == {25} and set(table["precision"]) == {"fp32"}
    assert list(table["seed"]) == [42, 44] and set(table["decoding"]) == {"greedy"}
    # encode (prefill to the first token) and decode (the other tokens) timed apart; 4 answers of 16 tokens
    assert (table["encode_seconds"].astype(float) > 0).all() and (table["decode_seconds"].astype(float) > 0).all()
    assert (table["prompt_tokens"] > 1000).all() and list(table["generated_tokens"]) == [64, 64]
    summary = json.loads((work / "results" / "grades" / "ink.summary.json").read_text())
    assert summary["views"] == 2 and summary["unparsed_views"] == 2 and summary["model_set"] == "smoke"
    assert summary["figures"]["overall"] == {"mean": None, "views": 0, "nan": 2,
                                             "why_no_mean": "no view's answers parsed (see reasons)"}
    assert [r["azimuth"] for r in summary["reasons"]] == [0, 90]
    print(f"restyle + drift + grades sub-DAG: {graded['seconds']:.1f} s")


def test_the_scorer_ran_in_its_own_job_with_the_adapter_unmerged(graded):
    work = graded["work"]
    record = json.loads((work / "results" / "provenance" / "grades" / "ink.json").read_text())
    (model,) = record["models"]
    assert model["role"] == "scorer" and model["adapter_merged"] is False and model["precision"] == "fp32"
    assert model["model"] == "models/smoke/scorer/base" and model["adapter"] == "models/smoke/scorer/adapter"
    assert model["revision_kind"] == model["adapter_revision_kind"] == "local_dir_sha256"
    assert record["model_set"] == "smoke" and record["model_loads"] == 1
    # where the job's seconds went: the scorer's load, then each view's questions
    assert record["timing"]["load_seconds"] > 0 and len(record["timing"]["view_seconds"]) == 2
    restyle = json.loads((work / "results" / "provenance" / "restyle" / "ink.json").read_text())
    assert restyle["models"][0]["backend"] == "qwen_image_edit_plus"  # the generator's record, not the scorer's
    built = json.loads((work / "models" / "smoke" / "scorer" / "smoke.json").read_text())
    assert built["model_set"] == "smoke" and built["seed"] == 7


def test_the_smoke_pair_loads_through_the_real_code_path_with_lora_layers_and_answers_deterministically(graded):
    import peft

    base = graded["work"] / "models" / "smoke" / "scorer"
    spec = sc.ScorerSpec(str(base / "base"), None, str(base / "adapter"), None, "fp32", "cpu", max_new_tokens=8)
    scorer = sc.load_scorer(spec)
    lora = [m for m in scorer.model.modules() if isinstance(m, peft.tuners.lora.LoraLayer)]
    assert len(lora) == 2  # q_proj and v_proj of the one layer, unmerged
    assert not any(getattr(m, "merged", False) for m in lora)
    from PIL import Image

    ims = [Image.new("RGB", (64, 64), (200, 10, 10)), Image.new("RGB", (64, 64), (10, 10, 200))]
    first, again = scorer.answer(ims, "Rate it.", 3), scorer.answer(ims, "Rate it.", 3)
    assert first.text == again.text and first.generated_tokens == 8
    sampled = sc.load_scorer(sc.ScorerSpec(**{**spec.__dict__, "decoding": "sample", "temperature": 1.0}))
    assert sampled.answer(ims, "Rate it.", 5).text == sampled.answer(ims, "Rate it.", 5).text


def test_changing_num_pass_makes_only_the_grades_stale(graded, tmp_path):
    from test_workflow import planned_jobs

    cfg = write_config(tmp_path / "two.yaml", num_pass=2)
    proc = run_snakemake(graded["work"], f"--configfile={cfg}", "-n", "results/drift/ink.csv",
                         "results/grades/ink.csv")
    assert planned_jobs(proc) == {("grades", "style=ink")}, proc.stdout[-3000:]


# ----------------------------------------------------------------------------- a real run's needs and ask
def real_params(**scorer) -> dict:
    s = {"base": "Qwen/Qwen3-VL-8B-Instruct", "base_revision": None, "adapter": "EditScore/EditScore-Qwen3-VL-8B-Instruct",
         "adapter_revision": None, "precision": "nf4", "device": "cuda", "decoding": "greedy", "temperature": 0.7,
         "max_new_tokens": 512} | scorer
    return {"job": {"style": "ink", "instruction": "Redraw it in ink.", "azimuths": [0, 90, 180, 270], "scorer": s,
                    "num_pass": 1, "model_set": "real"}}


def test_the_scorers_prompt_is_qwens_own_token_count_and_an_instruction_adds_at_most_a_token_a_byte():
    """models.yaml's prompt_tokens is the committed count (bench/sizing_tokens.py: Qwen's BPE and the sizing set's
    tokenizer, the larger, on EditScore's SC question as the scorer's processor makes it); with each counted
    instruction's bytes added it is at or above both counts, and a longer instruction asks more."""
    record = json.loads((REPO / "bench" / "results" / "sizing-tokens-2026-12-04.json").read_text())
    model = FACTS["models"]["qwen3_vl_8b"]
    rows = [r for r in record["scorer_questions"] if r["question"] == "SC"]
    bare, = [r for r in rows if r["instruction"] == ""]
    assert (max(bare["real_tokens"], bare["sizing_tokens"]), bare["images"], bare["image_size"]) == (
        model["prompt_tokens"], model["prompt_images"], model["prompt_image_size"])
    assert model["instruction_tokens_per_byte"] == 1
    assert len(rows) > 1
    for r in rows:  # the instruction's bytes bound its tokens both ways
        assert model["prompt_tokens"] + r["instruction_bytes"] >= max(r["real_tokens"], r["sizing_tokens"]), r
    short, long = (stage_for("grades").ask_for(AskContext(FACTS), {"style": "ink"}, {"job": {**real_params()["job"],
                   "instruction": text}}) for text in ("Ink.", "Ink. " * 200))
    per = model["activations_gib_per_prompt_token"]
    assert long.vram.value - short.vram.value >= 996 * per  # 1000 - 4 bytes, through the walls' reserves (>= 1)
    unknown = asks.scorer_ask(FACTS, real_params()["job"]["scorer"])  # a probe's or a lever's: no instruction known
    assert "instruction 1024 bytes (the longest allowed)" in unknown.vram.source
    # docs/walls.md ("Sizing model set") quotes the record's sizing/real ranges as it printed them
    readme = " ".join((REPO / "docs" / "walls.md").read_text().split())
    quoted = {"omnigen2": "for OmniGen2's prompts", "qwen_image_edit_plus": "for Qwen-Image-Edit's",
              "scorer": "for EditScore's questions"}
    for comp, words in quoted.items():
        span = record["summary"][comp]
        assert f"{span['min']:.3f}-{span['max']:.3f} {words}" in readme, comp


def test_a_real_run_names_the_unpinned_revisions_bitsandbytes_and_cuda():
    needs = stage_for("grades").needs_for(real_params())
    kinds = {(n.kind, n.what, n.revision) for n in needs}
    assert ("package", "bitsandbytes", None) in kinds and ("device", "cuda", None) in kinds
    lines = [preflight.check(n) for n in needs if n.kind == "unpinned"]
    assert lines == [
        "config grades.scorer_revision is not set (rule grades): pin the hub commit of Qwen/Qwen3-VL-8B-Instruct "
        "(`hf download Qwen/Qwen3-VL-8B-Instruct` prints the snapshot path; its last part is the commit)",
        "config grades.adapter_revision is not set (rule grades): pin the hub commit of "
        "EditScore/EditScore-Qwen3-VL-8B-Instruct (`hf download EditScore/EditScore-Qwen3-VL-8B-Instruct` prints "
        "the snapshot path; its last part is the commit)"]
    abc, fed = "abc".ljust(40, "0"), "fed".ljust(40, "0")  # commits: 40 hex digits
    pinned = stage_for("grades").needs_for(real_params(base_revision=abc, adapter_revision=fed, precision="bf16"))
    assert {(n.kind, n.what, n.revision) for n in pinned} == {
        ("device", "cuda", None), ("hf_model", "Qwen/Qwen3-VL-8B-Instruct", abc),
        ("hf_model", "EditScore/EditScore-Qwen3-VL-8B-Instruct", fed)}


def test_nf4_is_the_cuda_path_only():
    with pytest.raises(sc.ScorerUnavailable, match="nf4 needs a CUDA device .* allowed on this device: bf16 or fp32"):
        sc.ScorerSpec("b", None, "a", None, "nf4", "cpu")
    with pytest.raises(ValueError, match=r"scorer precision = 'int8'; allowed: one of \['nf4', 'bf16', 'fp32'\]"):
        sc.ScorerSpec("b", None, "a", None, "int8", "cuda")


@pytest.mark.parametrize("precision, weights", [("nf4", 6.453), ("bf16", 16.505)])
def test_the_scorer_asks_its_measured_weights_and_the_grading_prompt_through_the_walls(precision, weights):
    # the pass grows with EditScore's SC question and the job's instruction in it, at most a token a byte (17 bytes);
    # NF4 and bf16 processes keep different overheads
    model = FACTS["models"]["qwen3_vl_8b"]
    peak = weights + (model["prompt_tokens"] + 17) * model["activations_gib_per_prompt_token"]
    gib = driver_sees(peak, asks.weights_gib(FACTS, "qwen3_vl_8b", precision), "scorer")
    ask = stage_for("grades").ask_for(AskContext(FACTS), {"style": "ink"}, real_params(precision=precision))
    assert ask.vram.value == pytest.approx(gib) and ask.devices == ("cuda",) and ask.model == "qwen3_vl_8b"
    assert "measured" in ask.vram.source and "instruction 17 bytes" in ask.vram.source
    assert ask.seconds.value == pytest.approx(60 + 4 * 36)
    smoke = stage_for("grades").ask_for(AskContext(FACTS), {}, {"job": {"model_set": "smoke"}})
    assert smoke.vram.value == 0.0 and smoke.devices == ()


def test_the_scorers_estimate_grows_with_the_graded_images_visual_tokens():
    # Qwen3-VL: one visual token per 32 x 32 pixels (patch 16, merge 2); the SC prompt's two images at 768 px are
    # 2 x (24^2 - 16^2) = 640 tokens more than at 512: 869 + 640, and no instruction known, 1024 bytes: 2533 in all
    model = FACTS["models"]["qwen3_vl_8b"]
    scorer = real_params(precision="nf4")["job"]["scorer"]
    at = {size: asks.scorer_ask(FACTS, {**scorer, "image_size": size}) for size in (512, 768)}
    reserve, per_act, _ = asks.overhead(FACTS, "scorer")
    grown = 640 * model["activations_gib_per_prompt_token"] * (1 + reserve + per_act)
    assert at[768].vram.value - at[512].vram.value == pytest.approx(grown)
    assert "2533 prompt tokens (768 px images, instruction 1024 bytes (the longest allowed))" in at[768].vram.source
    # the H200's NF4 process grading 768 px images (2026-12-02, third run): the ask is above what the driver saw
    seen = json.loads((REPO / "bench/results/gpu-run-h200-2026-12-02-run3/heldout/scorer-qwen3_vl_8b-nf4.json").read_text())
    assert seen["resolution"] == 768 and at[768].vram.value >= seen["peak_nvml_process_gib"]
    # and the grades job says which size it grades: the larger of the renders' and the generator's views'
    from types import SimpleNamespace

    from fourloops.rule_functions.grades import get_grades_params

    g = {"scorer": scorer["base"], "scorer_revision": None, "adapter": scorer["adapter"], "adapter_revision": None,
         "score_range": 25, "num_pass": 1, "retries": 0, "seed": 1} | {k: scorer[k] for k in (
             "precision", "device", "decoding", "temperature", "max_new_tokens")}
    config = {"model_set": "real", "render": {"image_size": 512}, "generator": {"size": 768},
              "restyle": {"styles": {"ink": "ink"}, "azimuths": [0, 90]}, "grades": g}
    params = get_grades_params(config, SimpleNamespace(style="ink"))
    assert params["scorer"]["image_size"] == 768
    job = stage_for("grades").ask_for(AskContext(FACTS), {"style": "ink"}, {"job": {**params, "model_set": "real"}})
    assert job.vram.value == pytest.approx(asks.scorer_ask(FACTS, params["scorer"], instruction="ink").vram.value)
    assert "(768 px images, instruction 3 bytes)" in job.vram.source


def test_a_probe_of_smaller_images_is_a_floor_for_a_grades_job_of_larger_ones_never_its_ceiling():
    # the scorer's key names no image size: the H200's NF4 probe grading 512 px images (fifth run, 2026-12-02) must not
    # set the wall of a job grading 896 px ones, which the sixth run's held-out probe saw the driver hold 8.475 GiB for
    run = REPO / "bench" / "results"
    probe_path = run / "gpu-run-h200-2026-12-02-run5/sizing/results/probe/h200/scorer.json"
    probe = json.loads(probe_path.read_text())
    seen = json.loads((run / "gpu-run-h200-2026-12-02-run6/heldout/records/scorer-qwen3_vl_8b-nf4.json").read_text())
    assert (probe["resolution"], seen["resolution"], seen["precision"]) == (512, 896, "nf4")
    measured = asks.Measurements(probes={probe["key"]: [{**probe, "path": str(probe_path)}]})
    scorer = real_params(precision="nf4")["job"]["scorer"]
    instruction = "Repaint this image as a loose watercolor painting."
    at = {size: asks.scorer_ask(FACTS, {**scorer, "image_size": size}, measured=measured, machine="h200",
                                instruction=instruction) for size in (512, 896)}
    assert at[896].vram.value >= seen["peak_nvml_process_gib"] > at[512].vram.value
    assert "measured of another question" in at[896].vram.source
    assert at[512].vram.source.startswith("measured: probe on h200")  # its own question: the measurement stands


# ----------------------------------------------------------------------------- the gate
def test_an_nf4_grade_table_is_refused_as_a_corpus_unless_allowed_and_then_its_manifest_says_nf4(tmp_path):
    from test_gate import Work, corpus, rules_broken

    work = Work(tmp_path)
    work.chain("results/restyle/ink/views.json", generator_precision="bf16")
    work.job("grades", "ink", ["results/restyle/ink/views.json"],
             {"results/grades/ink.csv": b"style,overall\nink,6.1\n"}, precision="nf4",
             models=[{"model": "Qwen/Qwen3-VL-8B-Instruct", "revision": "c0ffee", "precision": "nf4",
                      "adapter": "EditScore/EditScore-Qwen3-VL-8B-Instruct"}])
    refused = work.gate([corpus("results/grades/ink.csv")])
    assert rules_broken(refused) == {2} and "nf4" in refused.refusals[0].evidence
    assert not (tmp_path / "results" / "published").exists()
    allowed = work.gate([corpus("results/grades/ink.csv", allow_precisions=["nf4"])])
    assert allowed.refusals == []
    entry = json.loads((tmp_path / "results/published/MANIFEST.json").read_text())["artifacts"]["grades/ink.csv"]
    assert entry["precision"] == "nf4" and "nf4" in entry["lineage_precisions"]
    assert entry["allowed_precisions"] == ["nf4"] and entry["models"][0]["precision"] == "nf4"


def test_a_grade_with_nan_is_written_nan_not_a_number():
    from fourloops.stages.grades import summarise

    table = pd.DataFrame({"azimuth": [0, 90], "parse_status": ["ok", "refusal"], "reason": ["", "the scorer refused"],
                          "prompt_following": [8.0, math.nan], "consistency": [4.0, math.nan],
                          "perceptual_quality": [6.0, math.nan], "overall": [math.sqrt(24), math.nan],
                          "encode_seconds": [1.0, 1.0], "decode_seconds": [2.0, 2.0]})
    s = summarise(table, "ink", "real")
    assert s["figures"]["overall"]["mean"] == pytest.approx(math.sqrt(24)) and s["figures"]["overall"]["nan"] == 1
    assert s["reasons"] == [{"azimuth": 90, "parse_status": "refusal", "reason": "the scorer refused"}]


@pytest.mark.parametrize("extra, expect", [
    ({"grades": {"decoding": "beam"}}, "grades.decoding = 'beam'"),
    ({"grades": {"scorer_revision": ""}}, "grades.scorer_revision = ''"),
    ({"grades": {"max_new_tokens": 0}}, "grades.max_new_tokens = 0"),
    ({"grades": {"device": "gpu"}}, "grades.device = 'gpu'"),
])
def test_bad_scorer_settings_are_refused_when_the_config_is_read(tmp_path, extra, expect):
    from test_restyle import refusal

    assert expect in refusal(tmp_path, extra)


# ----------------------------------------------------------------------------- several views a call (grades.batch)
def test_a_batched_grades_job_asks_the_tiny_scorer_two_views_a_call_and_records_its_batch(graded, tmp_path):
    """The smoke sub-DAG's two views graded again at two a call through the real scorer's batched call: the same
    seeds and attempts per view as the one-a-call table, each view half its call's seconds, the batch in the job's
    record; a batch above one under sample decoding is refused before any load."""
    import torch

    from fourloops import model_sets
    from fourloops.stages.grades import grades_stage

    torch.set_num_threads(1)
    work = graded["work"]
    one = pd.read_csv(work / "results" / "grades" / "ink.csv", keep_default_na=False)
    scorer = {**model_sets.scorer({"model_set": "smoke", "grades": {
        "scorer": "x", "scorer_revision": None, "adapter": "y", "adapter_revision": None, "precision": "fp32",
        "device": "cpu", "decoding": "greedy", "temperature": 0.7, "max_new_tokens": 16}, "smoke": {
        "scorer_max_new_tokens": 16}})}
    scorer.update(base=str(work / scorer["base"]), adapter=str(work / scorer["adapter"]))
    job = dict(renders=[str(work / p) for p in one["render"]], restyled=[str(work / p) for p in one["image"]],
               manifest=str(work / "results" / "restyle" / "ink" / "views.json"), style="ink",
               instruction=json.loads((work / "results" / "restyle" / "ink" / "views.json").read_text())["instruction"],
               azimuths=[0, 90], score_range=25, num_pass=1, retries=1, seed=42, model_set="smoke")
    calls = []
    answer_many = sc.EditScoreScorer.answer_many

    def counted(self, items):
        calls.append(len(items))
        return answer_many(self, items)

    import unittest.mock

    with unittest.mock.patch.object(sc.EditScoreScorer, "answer_many", counted), \
            unittest.mock.patch.object(sc.EditScoreScorer, "answer", side_effect=AssertionError("one a call")):
        record = grades_stage(csv_out=str(tmp_path / "ink.csv"), summary_out=str(tmp_path / "ink.summary.json"),
                              scorer=scorer, batch=2, **job)
    assert calls == [2, 2, 2, 2]  # SC, its retry, PQ, its retry: both views each time (the tiny scorer never parses)
    table = pd.read_csv(tmp_path / "ink.csv", keep_default_na=False)
    for column in ("azimuth", "seed", "attempts", "parse_status", "prompt_tokens"):
        assert list(table[column]) == list(one[column]), column
    assert record["batch"] == 2 and len(set(record["timing"]["view_seconds"])) == 1
    with pytest.raises(ValueError, match=r"grades.batch = 2 with grades.decoding = 'sample': not allowed"):
        grades_stage(csv_out=str(tmp_path / "s.csv"), summary_out=str(tmp_path / "s.json"),
                     scorer={**scorer, "decoding": "sample"}, batch=2, **job)


def test_the_scorers_batched_call_cuts_each_row_at_its_own_prompt_and_shares_the_seconds(graded):
    """answer_many over prompts of different lengths (left-padded): each row's prompt tokens are a one-question
    call's, its answer at most max_new_tokens, the call's seconds split evenly; sampling is refused."""
    import torch
    from PIL import Image

    torch.set_num_threads(1)
    base = graded["work"] / "models" / "smoke" / "scorer"
    spec = sc.ScorerSpec(str(base / "base"), None, str(base / "adapter"), None, "fp32", "cpu", max_new_tokens=8)
    scorer = sc.load_scorer(spec)
    red, blue = Image.new("RGB", (64, 64), (200, 10, 10)), Image.new("RGB", (64, 64), (10, 10, 200))
    items = [([red, blue], "Rate it.", 3), ([blue], "Rate this one, a longer question than the first.", 4)]
    alone = [scorer.answer(*item) for item in items]
    together = scorer.answer_many(items)
    assert [a.prompt_tokens for a in together] == [a.prompt_tokens for a in alone]
    assert alone[0].prompt_tokens != alone[1].prompt_tokens  # the first row was padded
    assert all(1 <= a.generated_tokens <= 8 for a in together)
    assert together[0].encode_seconds == together[1].encode_seconds > 0
    assert together[0].decode_seconds == together[1].decode_seconds
    sampled = sc.EditScoreScorer(scorer.model, scorer.processor, sc.ScorerSpec(
        **{**spec.__dict__, "decoding": "sample"}), {})
    with pytest.raises(ValueError, match="allowed: greedy"):
        sampled.answer_many(items)


def test_a_grades_job_asks_at_its_batch_auto_fills_the_card_and_the_lever_halves_a_number():
    """The ask at a number is the one-question ask plus a grading prompt's activations for each further view;
    auto is the largest batch of the job's views whose ask fits the desk's card (one under sample decoding); a batch
    asked by number that does not fit is offered its largest half that does."""
    from fourloops import levers, machines, walls

    model = FACTS["models"]["qwen3_vl_8b"]
    params = lambda **s: {"job": {**real_params(precision="bf16", image_size=1024, **s)["job"],  # noqa: E731
                                  "azimuths": list(range(0, 360, 45))}}
    ctx = AskContext(FACTS, None, "desk")
    at = {b: stage_for("grades").ask_for(ctx, {"style": "ink"}, params(batch=b)) for b in (1, 2, 8)}
    assert [at[b].batch for b in (1, 2, 8)] == [1, 2, 8]
    tokens = model["prompt_tokens"] + 2 * (32 ** 2 - 16 ** 2) + len("Redraw it in ink.")  # 1024 px images
    reserve, per_act, _ = asks.overhead(FACTS, "scorer")
    per_view = tokens * model["activations_gib_per_prompt_token"] * (1 + reserve + per_act)
    assert at[2].vram.value - at[1].vram.value == pytest.approx(per_view)
    assert at[8].vram.value - at[1].vram.value == pytest.approx(7 * per_view)
    card = machines.machine(machines.load(REPO / "config" / "machines.yaml"), "desk").vram_gib
    auto = stage_for("grades").ask_for(ctx, {"style": "ink"}, params(batch="auto"))
    fits = [b for b in range(1, 9) if asks.scorer_ask(FACTS, params()["job"]["scorer"], n_views=8, batch=b,
                                                      instruction="Redraw it in ink.").vram.value <= card]
    assert 1 < auto.batch == max(fits) < 8 and "grades.batch = auto" in auto.vram.source
    sampled = stage_for("grades").ask_for(ctx, {"style": "ink"}, params(batch="auto", decoding="sample"))
    assert sampled.batch == 1 and "sample decoding" in sampled.vram.source
    job = walls.PendingJob("grades", "results/grades/ink.csv", "pod", at[8], {"style": "ink"}, params(batch=8), ctx)
    machines_table = machines.load(REPO / "config" / "machines.yaml")
    assert not walls.check_jobs([job], machines_table, "desk").ok
    (lever,) = [lv for lv in levers.find(job, machines_table, "desk").levers if lv.kind == "batch"]
    largest_half = max(b for b in (4, 2, 1) if b in fits)
    assert lever.here and lever.name == f"grades.batch: {largest_half}" and lever.ask.batch == largest_half
