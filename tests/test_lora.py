"""The camera LoRA (rules/lora.smk, fourloops.lora) on the smoke set: records, embeddings in their own job,
training that overfits, SIGKILL and resume to the same LoRA, the census, the walls, bad inputs, and the
DAG edge to the `lora: true` ladder condition. CPU, one torch thread; the smoke ladder is the session's."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from conftest import REPO, SNAKEMAKE, driver_sees, job_process, run_snakemake, snakemake_env
from fourloops import asks, lora, lora_config, lora_records, machines, refusal, walls
from fourloops.backends import BACKENDS, SMOKE_BACKENDS
from fourloops.config import ConfigError, check_config, schema_with_slices
from fourloops.lora_file import LORA_METADATA_KEY, LORA_TARGET_MODULES

torch.set_num_threads(1)

FACTS = asks.load_facts(REPO / "config" / "models.yaml")
MACHINES = machines.load(REPO / "config" / "machines.yaml")
MODEL = "models/smoke/generator-qwen_image_edit_plus"
CONTRACT_KEYS = {"rank", "alpha", "dropout", "target_modules", "backend", "base_model", "model_set", "steps",
                 "resolution", "frozen_dtype"}


def spec(**kw) -> lora.TrainSpec:
    base = dict(backend="qwen_image_edit_plus", model=MODEL, revision=None, model_set="smoke", rank=4, alpha=4.0,
                dropout=0.0, target_modules=["to_q", "to_k", "to_v", "to_out.0"], steps=12, lr=1e-2,
                weight_decay=0.0, max_grad_norm=1.0, resolution=128, accumulation=2, frozen_dtype="fp32",
                text_encoder="precomputed", device="cpu", seed=3, checkpoint_every=4)
    return lora.TrainSpec.of(**{**base, **kw})


@pytest.fixture
def inputs(smoke_run, tmp_path, monkeypatch):
    """The smoke ladder's records, their renders, embeddings and tiny generator, in a private copy (cwd)."""
    src = smoke_run["workdir"]
    for rel in ("results/lora/records", "models/smoke"):
        shutil.copytree(src / rel, tmp_path / rel, symlinks=True)
    for rel in ("results/lora/records.jsonl", "results/lora/embeddings.safetensors"):
        shutil.copy2(src / rel, tmp_path / rel)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    return {"records": "results/lora/records.jsonl", "embeddings": "results/lora/embeddings.safetensors",
            "lora": str(out / "camera.safetensors"), "csv": str(out / "camera.loss.csv"),
            "png": str(out / "camera.loss.png"), "checkpoints": str(tmp_path / "ck" / "camera"), "out": out}


def train(s: lora.TrainSpec, io: dict, records: str | None = None) -> dict:
    return lora.train(s, records or io["records"], io["embeddings"], io["lora"], io["csv"], io["png"], io["checkpoints"])


def nothing_written(io: dict) -> None:
    assert list(io["out"].iterdir()) == []
    assert not Path(io["checkpoints"]).exists()


# ------------------------------------------------------------------------------------------- records
def test_records_are_distinct_ordered_pairs_drawn_deterministically():
    a = lora_records.azimuth_pairs([0, 90, 180, 270], 12, seed=5)
    assert a == lora_records.azimuth_pairs([0, 90, 180, 270], 12, seed=5)
    assert len(set(a)) == 12 and all(s != t for s, t in a)
    assert a != lora_records.azimuth_pairs([0, 90, 180, 270], 12, seed=6)
    recs = lora_records.make_records(a[:2], "orbit to {azimuth} from {source_azimuth}", {0: "0.png", 90: "90.png",
                                                                                  180: "180.png", 270: "270.png"})
    assert recs[0]["instruction"] == f"orbit to {a[0][1]} from {a[0][0]}"
    assert recs[0]["target"] == f"{a[0][1]}.png"


def test_the_smoke_records_and_embeddings_jobs(smoke_run):
    work = smoke_run["workdir"]
    records = lora_records.read_records(str(work / "results/lora/records.jsonl"))
    assert len(records) == 6  # lora.smoke.count
    for rec in records:
        assert f"orbited to {rec['target_azimuth']} degrees" in rec["instruction"]
        assert (work / rec["source"]).is_file() and (work / rec["target"]).is_file()
    emb = json.loads((work / "results/provenance/lora_embeddings/embeddings.json").read_text())
    assert emb["components_loaded"] == ["text_encoder"]  # the pipeline's encoder alone: no transformer, no VAE


# ------------------------------------------------------------------------------------------- training
def fixed_batch_loss(s: lora.TrainSpec, record: dict, embeddings: str, state: dict | None) -> float:
    """The flow loss of one record at fixed timesteps and noise, with the LoRA `state` (None: the base)."""
    from peft import LoraConfig, set_peft_model_state_dict
    from safetensors.torch import load_file

    transformer, vae = lora._load_frozen(s, Path(MODEL))
    lat = lora._encode_latents(s, vae, {k: lora.load_image(record[k], s.resolution) for k in ("source", "target")},
                               "cpu")
    if state is not None:
        transformer.add_adapter(LoraConfig(r=s.rank, lora_alpha=s.alpha, target_modules=list(s.target_modules)))
        set_peft_model_state_dict(transformer, state)
    emb = load_file(embeddings)
    batch = lora.Batch(lat["target"], lat["source"], emb[f"{record['id']}.embeds"][None], emb[f"{record['id']}.mask"][None])
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():
        losses = [float(lora.flow_loss(transformer, s.backend, batch, torch.tensor([t]),
                                       torch.randn(batch.x0.shape, generator=gen), torch.float32))
                  for t in (0.2, 0.4, 0.6, 0.8)]
    return sum(losses) / len(losses)


def test_training_overfits_a_fixed_tiny_batch_without_ever_loading_the_text_encoder(inputs, monkeypatch):
    import transformers
    from safetensors.torch import load_file

    def refuse(*a, **k):
        raise AssertionError("the training job loaded a text encoder")

    monkeypatch.setattr(transformers.Qwen2_5_VLForConditionalGeneration, "from_pretrained", refuse)
    monkeypatch.setattr(transformers.Qwen2_5_VLForConditionalGeneration, "__init__", refuse)
    first = lora_records.read_records(inputs["records"])[0]
    one = Path("one.jsonl")
    one.write_text(json.dumps(first) + "\n")
    s = spec(steps=40, accumulation=4, lr=3e-2, checkpoint_every=1000)
    fields = train(s, inputs, records=str(one))
    assert fields["components_loaded"] == ["transformer", "vae"] and fields["text_encoder_loaded"] is False
    before = fixed_batch_loss(s, first, inputs["embeddings"], None)
    after = fixed_batch_loss(s, first, inputs["embeddings"], load_file(inputs["lora"]))
    assert after < 0.75 * before, (before, after)
    import pandas as pd

    curve = pd.read_csv(inputs["csv"])
    assert list(curve["step"]) == list(range(1, 41))
    assert curve["loss"].tail(5).mean() < 0.8 * curve["loss"].head(5).mean(), curve["loss"].tolist()
    assert Path(inputs["png"]).stat().st_size > 5_000
    assert not Path(inputs["checkpoints"]).exists()  # the final LoRA supersedes its checkpoints


KILLED = r"""
import os, signal, sys, torch
torch.set_num_threads(1)
from fourloops import lora
args = sys.argv[1:]
s = lora.TrainSpec.of(**__import__("json").loads(args[0]))
real_save, real_loss = lora.save_checkpoint, lora.flow_loss
state = {"saved": 0, "after": 0}
def save(*a, **k):
    out = real_save(*a, **k)
    state["saved"] = a[1]
    return out
def loss(*a, **k):
    if state["saved"] == int(args[1]):
        state["after"] += 1
        if state["after"] == 3:  # mid-step, after the checkpoint of step args[1]
            os.kill(os.getpid(), signal.SIGKILL)
    return real_loss(*a, **k)
lora.save_checkpoint, lora.flow_loss = save, loss
lora.train(s, *args[2:])
"""


def test_sigkill_then_rerun_resumes_and_ends_with_the_same_lora(inputs):
    from dataclasses import asdict

    from safetensors.torch import load_file

    s = spec(steps=12, checkpoint_every=4, accumulation=2)
    paths = [inputs[k] for k in ("records", "embeddings", "lora", "csv", "png", "checkpoints")]
    cfg = json.dumps({**asdict(s), "target_modules": list(s.target_modules)})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", KILLED, cfg, "8", *paths], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == -9, proc.stderr[-3000:]
    ckpts = sorted(p.name for p in Path(inputs["checkpoints"]).iterdir())
    assert ckpts == ["step-000008"]  # the last one only; step 4's was removed once 8 was in place
    assert not Path(inputs["lora"]).exists()  # a killed run leaves no final-looking LoRA

    # a resume from another config is refused, naming the key; nothing overwritten
    ck = Path(inputs["checkpoints"]) / "step-000008"
    before = {p.name: p.read_bytes() for p in ck.iterdir()}
    with pytest.raises(lora.LoraError) as err:
        train(spec(steps=12, checkpoint_every=4, accumulation=2, rank=8, alpha=8.0), inputs)
    assert "lora.rank = 8 now, 4 in the checkpoint" in str(err.value), err.value
    assert "lora.alpha" in str(err.value) and "nothing was overwritten" in str(err.value)
    assert {p.name: p.read_bytes() for p in ck.iterdir()} == before
    assert not Path(inputs["lora"]).exists()

    resumed = train(s, inputs)  # the rerun (in this process, one thread, as the subprocess was)
    assert resumed["resumed_from_step"] == 8
    import pandas as pd

    curve = pd.read_csv(inputs["csv"])
    assert list(curve["step"]) == list(range(1, 13))
    assert list(curve["attempt"]) == [0] * 8 + [1] * 4  # the curve continues, it does not restart
    resumed_lora = load_file(inputs["lora"])

    for p in (inputs["lora"], inputs["csv"], inputs["png"]):
        os.unlink(p)
    whole = train(s, inputs)
    assert whole["resumed_from_step"] is None
    clean = pd.read_csv(inputs["csv"])
    assert clean["loss"].tolist() == curve["loss"].tolist()
    straight = load_file(inputs["lora"])
    assert straight.keys() == resumed_lora.keys()
    for key in straight:
        assert torch.equal(straight[key], resumed_lora[key]), key


# ---------------------------------------------------------------------------------- the saved file
def test_census_in_the_provenance_matches_the_saved_file_and_its_contract(smoke_run):
    from safetensors import safe_open
    from safetensors.torch import load_file

    work = smoke_run["workdir"]
    path = work / "results/lora/camera.safetensors"
    prov = json.loads((work / "results/provenance/lora_train/camera.json").read_text())
    tensors = load_file(path)
    lora_keys = [k for k in tensors if ".lora_A." in k or ".lora_B." in k]
    census = prov["census"]
    assert census["tensors"] == len(tensors) == len(lora_keys)  # LoRA A/B tensors only
    assert census["lora_tensors"] == len(lora_keys) == 2 * census["lora_layers"]
    assert census["trainable_parameters"] == sum(t.numel() for t in tensors.values()) == census["live_trainable_parameters"]
    with safe_open(str(path), framework="pt") as fh:
        meta = json.loads(fh.metadata()[LORA_METADATA_KEY])
    assert set(meta) == CONTRACT_KEYS and meta == prov["lora_metadata"]
    assert meta["target_modules"] == ["to_q", "to_k", "to_v", "to_out.0"] and meta["model_set"] == "smoke"
    assert {re.sub(r".*\.(to_q|to_k|to_v|to_out\.0)\.lora_[AB]\.weight$", r"\1", k) for k in lora_keys} == \
        {"to_q", "to_k", "to_v", "to_out.0"}
    # the training job loaded the transformer and the VAE, never the text encoder
    assert prov["components_loaded"] == ["transformer", "vae"] and prov["text_encoder_loaded"] is False
    assert prov["optimizer"].startswith("torch AdamW (CPU")
    assert not path.stat().st_mode & 0o222  # protected(): write-protected for everyone
    # the ladder's LoRA condition loaded exactly this file; the others loaded none
    from fourloops.io import sha256_file

    d = json.loads((work / "results/generate/D/views.json").read_text())
    assert d["lora"] is True and d["model"]["lora"]["sha256"] == sha256_file(path)
    assert d["model"]["lora"]["metadata"] == meta
    assert json.loads((work / "results/generate/A/views.json").read_text())["model"]["lora"] is None
    assert not (work / "results/lora/checkpoints").exists()


# --------------------------------------------------------------------------------------- the walls
def driver_gib(torch_peak: float, frozen: float, resolution: int = 512, rank: int = 8) -> float:
    """What the walls compare: a training process's torch peak (a measured step, plus the adapters at `rank`:
    models.yaml lora_gib_per_rank) with `frozen` GiB of frozen weights (models.yaml), a step at `resolution` px."""
    adapters = rank * FACTS["models"]["omnigen2"]["lora_gib_per_rank"]
    return driver_sees(torch_peak + adapters, frozen, "training", resolution)


def shown(gib: float) -> str:
    """A VRAM ask as the refusal prints it: whole MiB (what Snakemake's resources get), in GiB."""
    return f"{asks.gib_to_mb(gib) / 1024:.2f} GiB"


# the frozen weights models.yaml gives: the transformer at its dtype, the text encoder (bf16) when resident
FP32_TE = asks.weights_gib(FACTS, "omnigen2", "fp32", ["transformer"]) + asks.weights_gib(FACTS, "omnigen2", "bf16", ["text_encoder"])
FP32 = asks.weights_gib(FACTS, "omnigen2", "fp32", ["transformer"])
BF16_TE = asks.weights_gib(FACTS, "omnigen2", "bf16", ["transformer", "text_encoder"])
BF16 = asks.weights_gib(FACTS, "omnigen2", "bf16", ["transformer"])


def lora_job(frozen: str, encoder: str, resolution: int = 512) -> walls.PendingJob:
    job = {"backend": "omnigen2", "frozen_dtype": frozen, "text_encoder": encoder, "resolution": resolution,
           "device": "cuda", "accumulation": 8, "steps": 200}
    return walls.PendingJob(rule="lora_train", output="results/lora/camera.safetensors", profile="desk",
                            ask=asks.lora_ask(FACTS, job))


def test_the_seeds_fp32_setup_with_the_encoder_at_512_is_refused_on_the_desk_and_bf16_without_it_fits():
    seeds = walls.check_jobs([lora_job("fp32", "resident")], MACHINES, "desk")
    assert not seeds.ok
    text = refusal.report(seeds, MACHINES)
    assert shown(driver_gib(25.05, FP32_TE)) in text and "bench/lora_gpu.py" in text and "fits pod" in text, text
    assert walls.check_jobs([lora_job("bf16", "precomputed")], MACHINES, "desk").ok
    assert lora_job("bf16", "precomputed").ask.vram.value == pytest.approx(driver_gib(9.23, BF16))
    assert walls.check_jobs([lora_job("fp32", "precomputed")], MACHINES, "desk").ok  # measured 16.88
    page = " ".join((REPO / "docs" / "stages.md").read_text().split())  # the page quotes the asks the walls make
    for job in (lora_job("bf16", "precomputed"), lora_job("fp32", "resident")):
        assert f"asks {job.ask.vram.value:.2f} GiB" in page, job.ask.vram


def test_the_config_chooses_the_profile_and_a_real_run_is_refused_by_the_walls(tmp_path):
    cfg = tmp_path / "seeds.yaml"
    cfg.write_text(yaml.safe_dump({"lora": {"frozen_dtype": "fp32", "text_encoder": "resident", "profile": "desk"}}))
    proc = run_snakemake(tmp_path, "--config", "model_set=real", f"--configfile={cfg}", "--",
                         "results/lora/camera.safetensors", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "walls:" in out and "lora_train" in out, out[-3000:]
    assert shown(driver_gib(25.05, FP32_TE)) in out, out[-3000:]
    assert not (tmp_path / "results").exists()
    cfg.write_text(yaml.safe_dump({"lora": {"profile": "pod"}}))
    proc = run_snakemake(tmp_path, f"--configfile={cfg}", "-n", "results/lora/camera.safetensors")
    block = proc.stdout.split("rule lora_train:")[1].split("\n\n")[0]
    assert "profile=pod" in block, block


def test_the_seeds_setup_refused_on_the_desk_offers_the_loras_own_knobs_in_rfd_1140s_order():
    """Text encoder off the card (~7 GiB), then bf16 frozen weights, then the resolution, each re-asked."""
    from fourloops.stage import AskContext, stage_for

    job = {"backend": "omnigen2", "frozen_dtype": "fp32", "text_encoder": "resident", "resolution": 512,
           "device": "cuda", "accumulation": 8, "steps": 200, "model_set": "real"}
    ctx, params = AskContext(FACTS), {"train": job}
    ask = stage_for("lora_train").ask_for(ctx, {}, params)
    pending = walls.PendingJob("lora_train", "results/lora/camera.safetensors", "desk", ask, {}, params, ctx)
    verdict = walls.check_jobs([pending], MACHINES, "desk")
    assert not verdict.ok
    (found,) = refusal.levers_of(verdict, MACHINES).values()
    knobs = [lv for lv in found.levers if lv.kind in ("setting", "precision", "size")]
    assert [lv.name for lv in knobs] == ["lora.text_encoder: precomputed", "lora.frozen_dtype: bf16",
                                         "lora.resolution: 256"]
    encoder_off, bf16, small = (lv.ask.vram_mb / 1024.0 for lv in knobs)
    assert encoder_off == pytest.approx(driver_gib(17.95, FP32), abs=0.01)  # the fp32 step without the encoder, measured
    assert bf16 == pytest.approx(driver_gib(16.34, BF16_TE), abs=0.01)  # bf16 with the encoder resident, measured
    assert 6.5 < ask.vram_mb / 1024.0 - encoder_off < 8.0 and small < ask.vram_mb / 1024.0
    assert knobs[0].here and knobs[1].here
    text = refusal.report(verdict, MACHINES)
    assert "lora.text_encoder: precomputed" in text and f"{encoder_off:.2f} GiB" in text, text


# ------------------------------------------------------------------------------------- bad inputs
def checked(tmp_path: Path, lora_cfg: dict, **top) -> str:
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(schema_with_slices(REPO / "config" / "schema.yaml", REPO / "config" / "schema.d")))
    from snakemake.utils import validate

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["lora"] = dict(lora_cfg)  # over the slice's defaults (config/schema.d/lora.yaml)
    config.update(top)
    with pytest.raises(ConfigError) as err:
        check_config(config, schema, BACKENDS, SMOKE_BACKENDS, lambda c, p: validate(c, p))
    return str(err.value)


@pytest.mark.parametrize("lora_cfg,expect", [
    ({"rank": 0}, "lora.rank = 0: not allowed; allowed: a whole number >= 1"),
    ({"rank": -2}, "lora.rank = -2"),
    ({"accumulation": 0}, "lora.accumulation = 0: not allowed; allowed: a whole number >= 1"),
    ({"records": {"count": 600}}, "lora.records.count = 600: more records than azimuth pairs; allowed: at most 552"),
    ({"smoke": {"count": 13}}, "lora.smoke.count = 13: more records than azimuth pairs; allowed: at most 12"),
    ({"records": {"instruction": "turn around"}}, "lora.records.instruction = 'turn around'"),
    ({"frozen_dtype": "fp16"}, "lora.frozen_dtype = 'fp16'"),
    ({"target_modules": []}, "lora.target_modules = []"),
    ({"target_modules": ["to_q", "add_q_proj"]}, "lora.target_modules[1] = 'add_q_proj'"),
    # the schema holds the names the generator's LoRA reader loads (fourloops.lora_file.LORA_TARGET_MODULES); this
    # and lora.smoke.count also through the CLI: tests/test_bad_inputs.py::test_cli_refuses_every_problem_*
    ({"target_modules": ["to_q", "to_qq"]}, "lora.target_modules[1] = 'to_qq': not allowed"),
])
def test_bad_lora_config_is_refused_at_parse_time(tmp_path, lora_cfg, expect):
    msg = checked(tmp_path, lora_cfg)
    assert expect in msg, msg
    assert msg.startswith("invalid config (nothing was run or written):")


def filled(tmp_path: Path, lora_cfg: dict, **top) -> dict:
    """The config as the workflow sees it after the schema check, with `lora_cfg` over the defaults."""
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(schema_with_slices(REPO / "config" / "schema.yaml", REPO / "config" / "schema.d")))
    from snakemake.utils import validate

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["lora"] = dict(lora_cfg)
    config.update(top)
    return check_config(config, schema, BACKENDS, SMOKE_BACKENDS, lambda c, p: validate(c, p))


@pytest.mark.parametrize("lora_cfg,top,expect", [
    ({"resolution": 500}, {}, "lora.resolution = 500: the omnigen2 model cannot take it; allowed: a multiple of 16 "
                              "(patch 2 x VAE factor 8"),
    ({"resolution": 500}, {"model_set": "smoke"}, "lora.resolution = 500"),
])
def test_the_lora_config_is_held_to_the_architecture_descriptions(tmp_path, lora_cfg, top, expect):
    problems = lora_config.config_problems(filled(tmp_path, lora_cfg, **top))
    assert len(problems) == 1 and expect in problems[0], problems


def test_the_default_lora_config_passes_the_architecture_check(tmp_path):
    assert lora_config.config_problems(filled(tmp_path, {})) == []
    assert lora_config.config_problems(filled(tmp_path, {}, model_set="smoke")) == []


def test_the_described_lora_targets_are_the_transformer_classes_own():
    """config/architectures lists the peft names; a class whose Linear layers differ fails here, not in a job."""
    from fourloops import sizing

    arch = sizing.architecture("qwen_image_transformer")
    with torch.device("meta"):
        model = sizing._class(arch["class"])(**arch["config"])
    assert arch["lora_targets"] == lora.target_names(model)


def test_a_resolution_the_backend_cannot_take_is_refused_before_any_step(inputs):
    with pytest.raises(lora.LoraError) as err:
        train(spec(resolution=144), inputs)  # a multiple of 16, not of the tiny model's 2 x 16
    assert "lora.resolution = 144" in str(err.value) and "multiple of 32 (patch 2 x VAE factor 16" in str(err.value)
    nothing_written(inputs)


def test_a_target_module_the_reader_refuses_is_refused_by_the_library_too():
    with pytest.raises(lora.LoraError) as err:
        spec(target_modules=["to_q", "add_q_proj"])  # a Linear of the transformer, but the reader loads 4 names
    assert "lora.target_modules = ['to_q', 'add_q_proj']" in str(err.value)
    assert str(list(LORA_TARGET_MODULES)) in str(err.value)


def test_the_schema_allows_exactly_the_target_modules_the_reader_loads():
    schema = yaml.safe_load((REPO / "config" / "schema.d" / "lora.yaml").read_text())
    assert schema["properties"]["target_modules"]["items"]["enum"] == list(LORA_TARGET_MODULES)


def test_rank_and_accumulation_are_refused_by_the_library_too():
    with pytest.raises(lora.LoraError, match=r"lora.rank = 0: not allowed"):
        spec(rank=0)
    with pytest.raises(lora.LoraError, match=r"lora.accumulation = 0: not allowed"):
        spec(accumulation=0)


# ---------------------------------------------------------------------------- the DAG and staleness
def planned(proc) -> list[tuple[str, str]]:
    out = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", proc.stdout):
        m = re.match(r"(?:local)?rule (\w+):", block.strip())
        if m:
            wc = re.search(r"^\s+wildcards: (.*)$", block, re.M)
            out.append((m.group(1), wc.group(1).strip() if wc else ""))
    return sorted(out)


def test_a_retrained_lora_makes_exactly_the_lora_conditions_stale(built_copy, tmp_path):
    rank = tmp_path / "rank.yaml"
    rank.write_text("lora:\n  rank: 4\n")
    # (the finished LoRA is protected(): write-protected, so a retrain by a non-root user needs it removed on
    # purpose first; root writes anyway, so that is not asserted here)
    proc = run_snakemake(built_copy, f"--configfile={rank}", "-n", "results/ladder.csv")
    assert planned(proc) == sorted([("lora_train", ""), ("generate", "condition=D"), ("keypoints_generated", "kpset=D"),
                                    ("fit", "source=D"), ("ladder", "")]), proc.stdout[-4000:]
    block = next(b for b in proc.stdout.split("\n\n") if "rule generate:" in b)
    assert "results/lora/camera.safetensors" in block.split("output:")[0]  # the generate job's input named `lora`
    # where the training runs and how often it checkpoints change nothing it computes: nothing is stale
    where = tmp_path / "where.yaml"
    where.write_text("lora:\n  profile: pod\n  checkpoint_every: 3\n  smoke: {checkpoint_every: 2}\n")
    proc = run_snakemake(built_copy, f"--configfile={where}", "-n", "results/ladder.csv")
    assert "Nothing to be done" in proc.stdout, proc.stdout[-3000:]


def test_a_failed_retrain_keeps_the_last_good_lora_byte_identical_and_d_still_uses_it(built_copy):
    """Snakemake deletes the LoRA, its loss CSV and PNG and its record before the retrain runs (protected()
    does not stop root); the training killed, all four come back byte for byte and D's views stay fresh."""
    from fourloops import checkpoints, keep, verify

    kept = ["results/lora/camera.safetensors", "results/lora/camera.loss.csv", "results/lora/camera.loss.png",
            "results/provenance/lora_train/camera.json"]
    before = {p: (built_copy / p).read_bytes() for p in kept}
    # the checkpoint of a killed run of other code (another lineage): never resumed, removed before the job
    stale = built_copy / "results/lora/checkpoints/camera/step-000004"
    stale.mkdir(parents=True)
    (stale / "state.pt").write_bytes(b"other code's")
    (built_copy / checkpoints.LINEAGE_TABLE).write_text(json.dumps({"results/lora/checkpoints/camera": "0" * 16}))
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--profile", str(REPO / "profiles" / "smoke"),
           "--directory", str(built_copy), "--forcerun", "lora_train", "--", "results/lora/camera.safetensors"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=snakemake_env(), start_new_session=True)
    try:
        pid = job_process(proc, "lora_train.py")
        assert not (built_copy / kept[0]).exists()  # Snakemake removed the last LoRA before the job
        os.kill(pid, signal.SIGKILL)
        log, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0, log[-3000:]
    assert "kept the last good results/lora/camera.safetensors" in log, log[-3000:]
    assert ("removing the checkpoints in results/lora/checkpoints/camera, written under another lineage"
            in log and not stale.exists()), log[-3000:]
    assert {p: (built_copy / p).read_bytes() for p in kept} == before
    assert not (built_copy / keep.STASH).exists()
    assert verify.check(built_copy) == []               # D's generate record read exactly these bytes
    assert "Nothing to be done" in run_snakemake(built_copy, "-n", "results/ladder.csv").stdout


def test_a_checkpoint_is_resumed_only_by_the_lineage_that_wrote_it(tmp_path, monkeypatch, capsys):
    """The training's own fingerprint holds its config and inputs, not its code: the workflow keeps which lineage
    each checkpoint folder was written under, and removes another lineage's before the job."""
    from types import SimpleNamespace

    from fourloops import checkpoints

    monkeypatch.chdir(tmp_path)
    folder = Path("results/lora/checkpoints/camera")

    def run(lineage: str) -> bool:
        """One run's onstart with the LoRA job pending under `lineage`, a killed run's checkpoint in its folder."""
        (folder / "step-000004").mkdir(parents=True, exist_ok=True)
        job = SimpleNamespace(rule=SimpleNamespace(name="lora_train", output=["camera.safetensors"]), wildcards={},
                              params={"checkpoint_dir": str(folder), "lineage": lineage})
        # slurm: nothing moved to a pod, a node's job retires its checkpoints too
        checkpoints.retire(SimpleNamespace(needrun_jobs=lambda: [job]), lambda rule, wildcards: "desk", on_pod=set())
        return folder.exists()

    Path(".snakemake").mkdir()
    assert not run("aaaa")  # no run recorded who wrote it
    assert run("aaaa")      # written under this lineage: resumed
    assert not run("bbbb") and "written under another lineage" in capsys.readouterr().err
    assert json.loads(Path(checkpoints.LINEAGE_TABLE).read_text()) == {str(folder): "bbbb"}


def test_the_trained_smoke_lora_loads_into_the_generator_and_changes_its_output(smoke_run, monkeypatch):
    """The ladder's own trained checkpoint, not a hand-made file: same seed, different view; without it, the base."""
    import numpy as np
    from PIL import Image

    from fourloops.generate import load_backend

    work = smoke_run["workdir"]
    monkeypatch.chdir(work)
    settings = {"num_inference_steps": 2, "guidance": 1.0, "width": 64, "height": 64, "negative_prompt": None}
    ref = [Image.open(work / "results" / "lora" / "records" / "az090.png").convert("RGB")]
    prompt = "The same person, seen from 90 degrees."

    def view(**kw):
        g = load_backend("qwen_image_edit_plus", MODEL, None, "fp32", "cpu", dict(settings), **kw)
        return g, np.asarray(g.generate(ref, prompt, seed=5), dtype=np.float64)

    _, base = view()
    _, again = view()
    g, tuned = view(lora="results/lora/camera.safetensors")
    assert np.array_equal(base, again)
    assert np.abs(tuned - base).mean() > 0.1, "the trained LoRA changed nothing"
    assert g.describe()["lora"]["metadata"]["model_set"] == "smoke"
