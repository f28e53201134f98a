"""The sizing model set: real architectures (parameter counts against config/models.yaml, on the meta device),
the builders and the real loaders on the CPU (the detector at its real 576 shape; the diffusers pipeline and the
scorer through tiny architecture files in the same format), the probe records, the workflow and the gate."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from fourloops import sizing  # noqa: E402

FACTS = yaml.safe_load((REPO / "config" / "models.yaml").read_text())


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    torch.set_num_threads(1)


def _omnigen2_missing() -> str | None:
    for mod in ("omnigen2", "einops"):
        if importlib.util.find_spec(mod) is None:
            return f"module {mod!r} not importable (OmniGen2's source and its requirements are not on PYTHONPATH)"
    return None


# ------------------------------------------------------------------------------------ architectures
@pytest.mark.parametrize("name", [n for n in sizing.architectures()
                                  if sizing.architecture(n)["build"] not in ("rfdetr", "adapter")])
def test_every_architecture_is_the_real_one_by_its_parameter_count(name):
    arch = sizing.architecture(name)
    if arch["class"].startswith("omnigen2."):
        missing = _omnigen2_missing()
        if missing:
            pytest.skip(missing)
    module = sizing.instantiate(name, "meta")
    want = FACTS["models"][arch["checks"]["model"]]["components"][arch["checks"]["component"]]["params"]
    got = sizing.parameter_count(module)
    assert abs(got / want - 1) < 0.01, f"{name}: {got} parameters, config/models.yaml says {want:g}"
    assert next(module.parameters()).dtype == __import__("torch").bfloat16  # the dtype the real weights have on disk


def test_every_architecture_names_its_source_and_every_component_has_its_files():
    names = set(sizing.architectures())
    for comp, files in sizing.COMPONENTS.items():
        assert set(files) <= names, comp
    for n in names:
        arch = sizing.architecture(n)
        assert arch["source"] and arch["dtype_on_disk"] in sizing.DTYPES
    readme = (REPO / "config" / "architectures" / "README.md").read_text()
    assert all(f"{n}.yaml" in readme for n in names)


def test_unknown_component_and_architecture_are_named_with_what_is_allowed(tmp_path):
    with pytest.raises(sizing.SizingError, match=r"sizing component = 'nope'; allowed: one of \['omnigen2'"):
        sizing.build("nope", tmp_path / "x", "cpu")
    with pytest.raises(sizing.SizingError, match="architecture 'nope'.*allowed: one of"):
        sizing.architecture("nope")


# ------------------------------------------------------------------------------------ the detector, real shape
@pytest.fixture(scope="module")
def detector_dir(tmp_path_factory):
    pytest.importorskip("rfdetr")
    out = tmp_path_factory.mktemp("sizing") / "models" / "detector"
    rec = sizing.build("detector", out, "cpu")
    return out, rec


def test_the_detector_is_built_at_its_real_shape_and_loads_through_the_real_loader(detector_dir):
    from fourloops.keypoints import load_detector

    out, rec = detector_dir
    assert rec["model_set"] == "sizing" and (out / "sizing.json").is_file()
    want = FACTS["models"]["rfdetr_keypoint_preview"]["components"]["model"]["params"]
    assert abs(rec["parameters"]["model"] / want - 1) < 0.01
    assert rec["bytes_on_disk"] > rec["parameters"]["model"] * 4  # fp32 on disk, as RF-DETR checkpoints are
    det = load_detector(out / sizing.DETECTOR_FILE, device="cpu", resolution=576, num_windows=1)
    assert det.resolution == 576 and det.parameter_count() == rec["parameters"]["model"]


def test_a_cpu_probe_of_the_detector_records_the_new_fields_and_the_wall_check_reads_it(detector_dir, tmp_path,
                                                                                         monkeypatch):
    from fourloops import asks, provenance
    from fourloops.stage import measured_key
    from fourloops.stages.probe import ProbeError, probe

    out, _ = detector_dir
    caches = {"CUDA_CACHE_PATH": tmp_path / "nv", "TRITON_CACHE_DIR": tmp_path / "triton"}
    for var, path in caches.items():
        monkeypatch.setenv(var, str(path))
    assert provenance.kernel_caches_kib() == {"cuda_jit": 0.0, "triton": 0.0}  # none there yet
    (tmp_path / "triton" / "k").mkdir(parents=True)
    (tmp_path / "triton" / "k" / "kernel.cubin").write_bytes(b"x" * 2048)
    assert provenance.kernel_caches_kib() == {"cuda_jit": 0.0, "triton": 2.0}
    record_path = tmp_path / "results" / "probe" / "desk" / "detector.json"
    settings = {"weights": str(out / sizing.DETECTOR_FILE), "device": "cpu", "resolution": 288, "num_windows": 1}
    with pytest.raises(ProbeError, match=r"images_per_call = \[0\]; allowed: a list of batch sizes >= 1"):
        probe("detector", {**settings, "images_per_call": [0]}, machine_name="desk", model_set="sizing")
    rec = probe("detector", {**settings, "images_per_call": [1, 2]}, machine_name="desk", model_set="sizing",
                items=2, out=str(record_path), invocation="pytest")
    assert [c["images_per_call"] for c in rec["configurations"]] == [1, 2]  # one configuration per batch size
    for key in ("key", "precision", "resolution", "load_seconds", "peak_vram_gib", "peak_nvml_process_gib",
                "weights_gib", "configurations", "gpu_name", "driver", "started", "complete", "sizing_model"):
        assert key in rec, key
    # a CPU probe compiles nothing into the kernel caches: its first configuration's warm-up is a job's
    assert rec["kernel_caches"] == {"before_kib": {"cuda_jit": 0.0, "triton": 2.0},
                                    "after_kib": {"cuda_jit": 0.0, "triton": 2.0}, "grew": False}
    conf = rec["configurations"][0]
    assert conf["resolution"] == 288 and len(conf["items"]) == 2 and conf["seconds_per_item"] > 0
    assert conf["seconds_per_item"] == conf["items"][1]["seconds"]  # the first is the warm-up
    assert rec["apparatus"]["invocation"] == "pytest" and rec["apparatus"]["method"]
    assert rec["sizing_model"]["model_set"] == "sizing"
    assert rec["peak_vram_gib"] is None  # the CPU has no VRAM: nothing for the wall check, never a made-up figure
    # a CUDA probe's peak (hand-made from this record) is what the wall check uses: measured beats estimated
    rec["peak_vram_gib"] = 0.31
    record_path.write_text(json.dumps(rec))
    m = asks.Measurements.load(tmp_path, measured_key)
    fig = m.peak(rec["key"], "desk")
    assert fig.value == 0.31 and fig.source.startswith("measured: probe on desk")
    a = asks.detector_ask(FACTS, {**settings, "device": "cuda"}, measured=m)
    assert a.vram.source.startswith("measured")


def test_fourloops_probes_lists_a_record_per_configuration(tmp_path, capsys):
    from fourloops import cli

    rec = {"machine_name": "pod", "component": "generator", "model_set": "sizing", "key": "generator/omnigen2/bf16/512",
           "precision": "bf16", "resolution": 512, "load_seconds": 41.2, "peak_vram_gib": 15.1, "started": "2026-12-02T10:00:00+00:00",
           "gpu_name": "NVIDIA H200", "configurations": [
               {"references": 1, "peak_vram_gib": 14.9, "seconds_per_item": 9.8},
               {"references": 3, "peak_vram_gib": 15.1, "seconds_per_item": 31.5}]}
    p = tmp_path / "results" / "probe" / "pod" / "generator.json"
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(rec))
    assert cli.main(["probes", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "refs" in out and "s/item" in out
    lines = [line for line in out.splitlines() if "generator/omnigen2/bf16/512" in line]
    assert len(lines) == 2 and "NVIDIA H200" in lines[1] and "31.500" in lines[1] and "2026-12-02" in lines[1]


# ------------------------------------------------------------------------------------ diffusers + scorer, tiny
def _tiny_arch_dir(tmp_path: Path) -> Path:
    """config/architectures with the Qwen-Image and Qwen3-VL files shrunk (the same format and builders)."""
    d = tmp_path / "arch"
    shutil.copytree(REPO / "config" / "architectures", d)

    def shrink(name, **config):
        arch = yaml.safe_load((d / f"{name}.yaml").read_text())
        arch["config"] = config
        (d / f"{name}.yaml").write_text(yaml.safe_dump(arch))

    shrink("qwen_image_transformer", patch_size=2, in_channels=16, out_channels=4, num_layers=1, attention_head_dim=16,
           num_attention_heads=2, joint_attention_dim=16, guidance_embeds=False, axes_dims_rope=[4, 6, 6])
    shrink("qwen_image_vae", base_dim=2, z_dim=4, dim_mult=[1, 1, 1, 1, 1], num_res_blocks=0,
           temperal_downsample=[False] * 4, latents_mean=[0.0] * 4, latents_std=[1.0] * 4)
    text = {"hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 2, "vocab_size": 8192, "max_position_embeddings": 4096,
            "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"}}
    shrink("qwen2_5_vl_7b", text_config=text, vision_config={
        "depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": 16,
        "fullatt_block_indexes": [0]}, hidden_size=16, vocab_size=8192)
    shrink("qwen3_vl_8b", text_config={**text, "head_dim": 8, "rope_scaling": None, "rope_parameters": {
        "rope_type": "default", "rope_theta": 5e6, "mrope_section": [1, 1, 2], "mrope_interleaved": True}},
        vision_config={"depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": 16,
                       "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
                       "num_position_embeddings": 16, "deepstack_visual_indexes": [0]}, tie_word_embeddings=False)
    adapter = yaml.safe_load((d / "editscore_adapter.yaml").read_text())
    adapter["config"]["r"] = 2
    (d / "editscore_adapter.yaml").write_text(yaml.safe_dump(adapter))
    return d


def test_a_diffusers_pipeline_built_from_architecture_files_is_probed_through_load_backend(tmp_path):
    pytest.importorskip("diffusers")
    from fourloops.stages.probe import probe

    arch = _tiny_arch_dir(tmp_path)
    out = tmp_path / "models" / "qwen_image_edit_plus"
    rec = sizing.build("qwen_image_edit_plus", out, "cpu", texts=["Turn the person into a marble statue."],
                       arch_dir=arch)
    assert rec["model_set"] == "sizing" and rec["dtypes"]["transformer"] == "bfloat16"
    assert json.loads((out / "model_index.json").read_text())["_class_name"] == "QwenImageEditPlusPipeline"
    assert rec["tokenizer"]["vocab_entries"] < 2000
    gen = {"backend": "qwen_image_edit_plus", "model": str(out), "revision": None, "precision": "bf16", "device": "cpu",
           "steps": 1, "guidance": 1.0, "size": 64, "negative_prompt": None}
    r = probe("generator", gen, machine_name="desk", model_set="sizing", references=[1, 2], items=1,
              prompt="Turn the person into a marble statue.")
    assert [c["references"] for c in r["configurations"]] == [1, 2] and r["complete"]
    assert r["model"]["model_source"] == "local_dir" and r["model"]["prompt_tokens"] < 20  # words, not bytes
    assert r["key"] == "generator/qwen_image_edit_plus/bf16/64"


def test_omnigen2_built_from_architecture_files_is_probed_through_load_backend(tmp_path):
    missing = _omnigen2_missing()
    if missing:
        pytest.skip(missing)
    arch = _tiny_arch_dir(tmp_path)

    def shrink(name, **config):
        data = yaml.safe_load((arch / f"{name}.yaml").read_text())
        data["config"] = config
        (arch / f"{name}.yaml").write_text(yaml.safe_dump(data))

    shrink("omnigen2_transformer", patch_size=2, in_channels=16, hidden_size=48, num_layers=1, num_refiner_layers=1,
           num_attention_heads=2, num_kv_heads=1, multiple_of=16, norm_eps=1e-5, axes_dim_rope=[8, 8, 8],
           axes_lens=[1024, 1024, 1024], text_feat_dim=16, timestep_scale=1000.0)
    text = {"hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 2, "vocab_size": 8192, "max_position_embeddings": 4096,
            "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"}}
    shrink("qwen2_5_vl_3b", text_config=text, vision_config={
        "depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": 16,
        "fullatt_block_indexes": [0]}, hidden_size=16, vocab_size=8192)
    shrink("flux_vae", block_out_channels=[8, 8], down_block_types=["DownEncoderBlock2D"] * 2,
           up_block_types=["UpDecoderBlock2D"] * 2, latent_channels=16, layers_per_block=1, norm_num_groups=4,
           use_quant_conv=False, use_post_quant_conv=False)
    from fourloops.stages.probe import probe

    out = tmp_path / "models" / "omnigen2"
    rec = sizing.build("omnigen2", out, "cpu", arch_dir=arch)
    index = json.loads((out / "model_index.json").read_text())
    assert index["_class_name"] == "OmniGen2Pipeline" and index["transformer"][1] == "OmniGen2Transformer2DModel"
    assert set(rec["parameters"]) == {"transformer", "mllm", "vae"}
    gen = {"backend": "omnigen2", "model": str(out), "revision": None, "precision": "bf16", "device": "cpu",
           "steps": 2, "guidance": 4.0, "size": 64, "negative_prompt": ""}
    r = probe("generator", gen, machine_name="desk", model_set="sizing", references=[1, 2], items=1)
    assert r["complete"] and [c["references"] for c in r["configurations"]] == [1, 2]
    assert r["model"]["parameters_by_component"] == {k: rec["parameters"][k] for k in ("transformer", "vae", "mllm")}


def test_the_scorer_base_and_its_random_adapter_load_through_load_scorer(tmp_path):
    pytest.importorskip("peft")
    from fourloops.stages.probe import probe

    arch = _tiny_arch_dir(tmp_path)
    out = tmp_path / "models" / "scorer"
    rec = sizing.build("scorer", out, "cpu", arch_dir=arch)
    assert rec["adapter_parameters"] > 0 and "ASSUMED" in rec["adapter_assumed"]
    s = {"base": str(out / "base"), "base_revision": None, "adapter": str(out / "adapter"), "adapter_revision": None,
         "precision": "fp32", "device": "cpu", "max_new_tokens": 3, "image_size": 64, "batch": 2}
    r = probe("scorer", s, machine_name="desk", model_set="sizing", items=1, prompt="Redraw it in ink.")
    # one question a call first (the walls read its peak), then grades.batch's questions a call (answer_many)
    assert [(c["question"], c["batch"]) for c in r["configurations"]] == [("SC", 1), ("PQ", 1), ("SC", 2), ("PQ", 2)]
    batched = r["configurations"][2]
    assert batched["seconds_per_item"] == pytest.approx(batched["seconds_per_call"] / 2, abs=1e-4)
    assert r["instruction"] == "Redraw it in ink."  # the walls judge the probe by its own question's instruction
    row = r["configurations"][0]["items"][0]
    assert row["generated_tokens"] >= 1 and row["encode_seconds"] > 0
    assert r["sizing_model"]["adapter_assumed"]


# ------------------------------------------------------------------------------------ workflow and gate
def _snakemake(*args, cwd=REPO):
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{os.environ.get('PYTHONPATH', '')}"}
    exe = Path(sys.executable).with_name("snakemake")
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def test_the_sizing_dry_run_builds_the_real_models_and_asks_what_they_ask(tmp_path):
    top = {".git", "sizing", "smoke", "results", ".snakemake", "models", "logs", "benchmarks", ".venv"}
    shutil.copytree(REPO, tmp_path / "repo", ignore=lambda d, names: [
        n for n in names if (Path(d) == REPO and n in top) or n == "__pycache__"])
    run = _snakemake("--profile", "profiles/sizing", "-n", "probe", cwd=tmp_path / "repo")
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "Working directory: " in out and str(tmp_path / "repo" / "sizing") in out  # outputs under sizing/
    for component in ("omnigen2", "detector", "scorer"):
        assert f"output: models/sizing/{component}" in out
    # the probe of the generator asks the real OmniGen2's figure, not smoke's nothing, at the largest batch it times:
    # generator.batch is auto, so the most views a call whose ask fits the desk's card
    from fourloops import asks

    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    facts = asks.load_facts(REPO / "config" / "models.yaml")
    gen = out[out.index("wildcards: machine=desk, component=generator"):][:400]
    batch = int(re.search(r"\bbatch=(\d+)", gen).group(1))
    want = asks.generator_ask(facts, cfg["generator"], batch=batch).vram_mb
    assert want > 15000 and f"vram_mb={want}" in gen, gen
    assert batch > 1 and asks.generator_ask(facts, cfg["generator"], batch=batch + 1).vram_mb > 24 * 1024, batch
    assert not any(line.startswith("rule smoke_") for line in out.splitlines())


def test_every_output_of_the_sizing_set_says_so_and_the_gate_refuses_it():
    from fourloops.gate.refusals import RULES

    smk = (REPO / "rules" / "sizing.smk").read_text()
    assert 'model_set=config["model_set"]' in smk
    profile = yaml.safe_load((REPO / "profiles" / "sizing" / "config.yaml").read_text())
    assert profile["directory"] == "sizing" and "model_set=sizing" in profile["config"]
    assert "sizing" in RULES[4]
    schema = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
    assert "sizing" in schema["properties"]["model_set"]["enum"]


def test_tables_and_pages_of_the_sizing_set_say_their_values_mean_nothing():
    from fourloops import figures, pages

    html = pages.page("fourloops ladder (sizing model set)", "<p>x</p>", figures.marked("sizing"))
    assert figures.SIZING_MARK in html and "mean nothing" in figures.SIZING_MARK
    assert figures.SMOKE_MARK in pages.page("t", "", figures.marked("smoke"))
    assert figures.marked("real") is False and "SIZING" not in pages.page("t", "", figures.marked("real"))
    for caption in ("ladder_table.rst", "grades_table.rst"):
        assert "SIZING: real shapes, random weights" in (REPO / "report" / caption).read_text()


def test_no_weight_of_a_built_sizing_model_is_left_at_its_classs_zero_init():
    """Zeros where a released model has trained values would make outputs constant and LoRA gradients zero."""
    import torch

    from fourloops import sizing

    torch.manual_seed(0)
    layer = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
    torch.nn.init.zeros_(layer[1].weight)
    torch.nn.init.zeros_(layer[1].bias)
    assert sizing._randomise_zero_inits(layer) == 2
    assert all(bool(p.any()) for p in layer.parameters())


def test_a_lora_step_probe_runs_the_trainer_and_the_wall_check_reads_its_peak_and_seconds(tmp_path):
    """The LoRA probe is fourloops.lora.train itself, a few optimizer steps on synthetic records of the real shapes."""
    pytest.importorskip("diffusers")
    from fourloops import asks
    from fourloops.stage import measured_key
    from fourloops.stages.probe import probe

    out = tmp_path / "models" / "qwen_image_edit_plus"
    sizing.build("qwen_image_edit_plus", out, "cpu", texts=["seen from 90 degrees"], arch_dir=_tiny_arch_dir(tmp_path))
    settings = {"backend": "qwen_image_edit_plus", "model": str(out), "model_set": "sizing", "rank": 2, "alpha": 2.0,
                "dropout": 0.0, "target_modules": ["to_q", "to_k", "to_v", "to_out.0"], "steps": 200, "lr": 1e-4,
                "weight_decay": 0.0, "max_grad_norm": 1.0, "resolution": 64, "accumulation": 8, "micro_batch": 2,
                "frozen_dtype": "fp32", "text_encoder": "precomputed", "seed": 0, "device": "cpu"}
    dest = tmp_path / "results" / "probe" / "desk" / "lora_step.json"
    rec = probe("lora_step", settings, machine_name="desk", model_set="sizing", items=3, out=str(dest))
    assert rec["key"] == asks.lora_key(settings) == "lora_step/qwen_image_edit_plus/fp32/transformer/64"
    assert rec["determinism"]["applied"] and rec["determinism"]["mode"] == "on"  # timed as the jobs run
    # one sample a step, then the micro-batch's two a step: each configuration's seconds are a sample's
    one, two = rec["configurations"]
    assert (one["batch"], two["batch"]) == (1, 2)
    for conf in (one, two):
        assert len(conf["items"]) == 3 and conf["seconds_per_item"] > 0 and conf["error"] is None
    steady_call = sum(i["seconds"] for i in two["items"][1:]) / 2
    assert two["seconds_per_item"] == pytest.approx(steady_call / 2, abs=1e-4)
    assert rec["model"]["components_loaded"] == ["transformer", "vae"] and not rec["model"]["text_encoder_loaded"]
    assert rec["model"]["census"]["lora_tensors"] > 0
    measured = asks.Measurements.load(tmp_path, measured_key)
    assert measured.timing(rec["key"], "desk", batch=1)[1] == one["seconds_per_item"]
    assert measured.timing(rec["key"], "desk", batch=2)[1] == two["seconds_per_item"]
    assert measured.timing(rec["key"], "desk", batch=8)[1] == two["seconds_per_item"]  # beyond the probed: its largest


def test_a_text_encoder_probe_runs_the_embeddings_jobs_code_and_times_the_embeddings_job(tmp_path):
    """The text encoder alone through fourloops.lora_embeddings' own loader and encoder; its load and per-prompt
    seconds become the lora_embeddings job's forecast, its peak the job's VRAM figure."""
    pytest.importorskip("diffusers")
    from fourloops import asks
    from fourloops.declarations.lora_embeddings import STAGE
    from fourloops.stage import AskContext, measured_key
    from fourloops.stages.probe import probe

    out = tmp_path / "models" / "qwen_image_edit_plus"
    sizing.build("qwen_image_edit_plus", out, "cpu", texts=["seen from 90 degrees"], arch_dir=_tiny_arch_dir(tmp_path))
    settings = {"backend": "qwen_image_edit_plus", "model": str(out), "revision": None, "device": "cpu",
                "text_encoder_dtype": "fp32", "max_sequence_length": 64}
    dest = tmp_path / "results" / "probe" / "desk" / "text_encoder.json"
    rec = probe("text_encoder", settings, machine_name="desk", model_set="sizing", items=3, out=str(dest))
    assert rec["key"] == "text_encoder/qwen_image_edit_plus/fp32" and rec["precision"] == "fp32"
    assert rec["model"]["components_loaded"] == ["text_encoder"]  # never the transformer or the VAE
    assert rec["apparatus_seconds"] > 0  # its own record's making, which the job's forecast leaves out
    (conf,) = rec["configurations"]
    assert conf["error"] is None and len(conf["items"]) == 3 and all(i["tokens"] > 0 for i in conf["items"])
    # the job's forecast: the probe's load, warm-up and process once, then its steady seconds per prompt
    job = {**settings, "records": 10, "model_set": "sizing"}
    measured = asks.Measurements.load(tmp_path, measured_key)
    seconds = STAGE.ask_for(AskContext(FACTS, measured, machine="desk"), {}, {"job": job}).seconds
    warm = max(0.0, conf["first_item_seconds"] - conf["seconds_per_item"])
    assert seconds.value == pytest.approx(rec["load_seconds"] + warm + 10 * conf["seconds_per_item"], abs=1e-6)
    assert seconds.source.startswith("measured: probe on desk")
    unmeasured = STAGE.ask_for(AskContext(FACTS, None, machine="desk"), {}, {"job": job}).seconds
    assert unmeasured.source.startswith("estimate:")


def test_a_batched_probe_configuration_that_fails_leaves_the_one_item_peak_the_walls_read(monkeypatch):
    """A probe's one-item configurations give the peak the walls read; a batched call that did not fit (an OOM) is
    recorded in its own row and in the errors, and voids no one-item peak; a one-item failure voids it."""
    from fourloops import stage
    from fourloops.stages.probe import probe

    def fake(rows):
        return lambda *a, **k: (0.5, {"weights_gib": 1.0, "model": {}}, rows)

    one = {"batch": 1, "peak_vram_gib": 2.5, "nvml_process_gib": 3.0, "seconds_per_item": 0.1, "error": None}
    eight = {"batch": 8, "peak_vram_gib": None, "nvml_process_gib": None, "seconds_per_item": None,
             "error": "OutOfMemoryError: CUDA out of memory"}
    settings = {"resolution": 576, "device": "cpu", "weights": "absent.pth", "num_windows": 1}
    monkeypatch.setattr(stage, "load", lambda dotted: fake([one, eight]))
    rec = probe("detector", settings, machine_name="desk", model_set="sizing", items=2)
    assert (rec["peak_vram_gib"], rec["peak_nvml_process_gib"], rec["complete"]) == (2.5, 3.0, False)
    assert rec["errors"] == ["batch 8: OutOfMemoryError: CUDA out of memory"]
    monkeypatch.setattr(stage, "load", lambda dotted: fake([{**one, "error": "OutOfMemoryError: CUDA"}, eight]))
    assert probe("detector", settings, machine_name="desk", model_set="sizing", items=2)["peak_vram_gib"] is None
