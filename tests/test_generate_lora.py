"""The generator loads the camera LoRA (issue 11): tiny smoke pipeline, CPU, one thread, no network.

LoRA files are made here in the training stage's contract format: `peft.get_peft_model_state_dict`
of the tiny transformer after `inject_adapter_in_model`, lora_B drawn non-zero (peft starts it at
zero, which would change nothing), saved with safetensors and the `fourloops.lora` metadata.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing in these tests may reach a model hub

import numpy as np
import pytest
import torch
from PIL import Image

from fourloops import generate as G
from fourloops import loading
from fourloops.lora_file import LORA_ADAPTER_NAME, LORA_METADATA_KEY, LoraFileError
from fourloops.io import read_json, sha256_file

torch.set_num_threads(1)

BACKEND = "qwen_image_edit_plus"
SEED = 0
SETTINGS = {"num_inference_steps": 2, "guidance": 4.0, "width": 128, "height": 128, "negative_prompt": None}
PROMPT = "the same person, camera orbited to 90 degrees"
ALL_TARGETS = ["to_q", "to_k", "to_v", "to_out.0"]
RANK = 4


@pytest.fixture(scope="session")
def smoke_dir(smoke_generator_dir) -> Path:
    """The session's smoke pipeline (conftest.smoke_generator_dir: BACKEND at SEED)."""
    assert (smoke_generator_dir.name, read_json(smoke_generator_dir / "smoke.json")["seed"]) == (BACKEND, SEED)
    return smoke_generator_dir


def _meta(smoke_dir: Path, **over) -> dict:
    meta = {"rank": RANK, "alpha": 8.0, "dropout": 0.05, "target_modules": list(ALL_TARGETS), "backend": BACKEND,
            "base_model": str(smoke_dir), "model_set": "smoke", "steps": 3, "resolution": 128,
            "frozen_dtype": "fp32"}
    meta.update(over)
    return meta


def _lora_tensors(smoke_dir: Path, rank: int = RANK, targets=ALL_TARGETS, b_std: float = 0.5) -> dict:
    """What the trainer saves: get_peft_model_state_dict of the injected transformer (adapter name stripped)."""
    from diffusers import QwenImageTransformer2DModel
    from peft import LoraConfig, get_peft_model_state_dict, inject_adapter_in_model

    transformer = QwenImageTransformer2DModel.from_pretrained(str(smoke_dir / "transformer"))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        inject_adapter_in_model(LoraConfig(r=rank, lora_alpha=2.0 * rank, target_modules=list(targets)), transformer)
        draw = torch.Generator().manual_seed(12)
        with torch.no_grad():
            for name, param in transformer.named_parameters():
                if "lora_B" in name:
                    param.normal_(0.0, b_std, generator=draw) if b_std else param.zero_()
    return {k: v.detach().clone().contiguous() for k, v in get_peft_model_state_dict(transformer).items()}


def _save(path: Path, tensors: dict, metadata: dict | str | None) -> Path:
    from safetensors.torch import save_file

    meta = None if metadata is None else {
        LORA_METADATA_KEY: metadata if isinstance(metadata, str) else json.dumps(metadata)}
    save_file(tensors, str(path), metadata=meta)
    return path


@pytest.fixture(scope="module")
def lora_file(smoke_dir, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lora") / "camera.safetensors"
    return _save(path, _lora_tensors(smoke_dir), _meta(smoke_dir))


def _refs() -> list[Image.Image]:
    return [Image.fromarray(np.random.RandomState(3).randint(0, 256, (128, 128, 3), dtype=np.uint8))]


def _pixels(generator) -> np.ndarray:
    return np.asarray(generator.generate(_refs(), PROMPT, 7), dtype=np.int16)


def _load(smoke_dir, lora=None, precision="fp32"):
    return G.load_backend(BACKEND, str(smoke_dir), None, precision, "cpu", SETTINGS, lora=lora)


# --- the LoRA changes the output; without it the output is the base model's ---------------------


def test_lora_changes_output_and_without_it_the_base_is_bit_equal(smoke_dir, lora_file):
    base_a = _pixels(_load(smoke_dir))
    base_b = _pixels(_load(smoke_dir))
    with_lora = _load(smoke_dir, lora=lora_file)
    adapted = _pixels(with_lora)
    assert np.array_equal(base_a, base_b)  # no LoRA: bit-equal runs
    diff = np.abs(adapted.astype(float) - base_a)
    assert diff.mean() > 1.0, diff.mean()  # measured ~4.5 (of 255) on the smoke pipeline
    assert (diff > 0).mean() > 0.25
    # a base model loaded after the LoRA one is untouched by it
    assert np.array_equal(_pixels(_load(smoke_dir)), base_a)


def test_every_tensor_of_the_file_is_in_the_transformer_unmerged_and_in_eval(smoke_dir, lora_file):
    from peft import get_peft_model_state_dict
    from peft.tuners.lora import LoraLayer
    from safetensors.torch import load_file

    g = _load(smoke_dir, lora=lora_file)
    transformer = g.pipe.transformer
    loaded = get_peft_model_state_dict(transformer, adapter_name=LORA_ADAPTER_NAME)
    saved = load_file(str(lora_file))
    assert set(loaded) == set(saved)
    for key, tensor in saved.items():
        assert torch.equal(loaded[key], tensor), key
    layers = [m for m in transformer.modules() if isinstance(m, LoraLayer)]
    assert len(layers) == 4  # one transformer block: to_q, to_k, to_v, to_out.0
    for layer in layers:
        assert layer.scaling[LORA_ADAPTER_NAME] == pytest.approx(8.0 / RANK)  # alpha / rank from the metadata
        # the file says dropout 0.05 (training): none at inference
        assert isinstance(layer.lora_dropout[LORA_ADAPTER_NAME], torch.nn.Identity)
        assert not layer.merged
    assert not transformer.training
    assert not any(p.requires_grad for n, p in transformer.named_parameters() if "lora_" in n)


def test_a_zero_lora_leaves_the_output_bit_equal(smoke_dir, tmp_path):
    """The injected layers add exactly B·A·x: with B = 0 nothing changes, so the difference above is the weights'."""
    zero = _save(tmp_path / "zero.safetensors", _lora_tensors(smoke_dir, b_std=0.0), _meta(smoke_dir))
    assert np.array_equal(_pixels(_load(smoke_dir, lora=zero)), _pixels(_load(smoke_dir)))


def test_bf16_generator_casts_the_adapter_to_bf16(smoke_dir, lora_file):
    g = _load(smoke_dir, lora=lora_file, precision="bf16")
    lora_params = [p for n, p in g.pipe.transformer.named_parameters() if "lora_" in n]
    assert lora_params and all(p.dtype == torch.bfloat16 for p in lora_params)
    assert g.describe()["lora"]["dtype"] == "bfloat16"


# --- provenance -----------------------------------------------------------------------------------


def test_describe_records_path_sha256_metadata_and_census(smoke_dir, lora_file, tmp_path):
    d = _load(smoke_dir, lora=lora_file).describe()["lora"]
    assert d["path"] == str(lora_file)
    assert d["sha256"] == sha256_file(lora_file) and len(d["sha256"]) == 64
    assert d["metadata"] == _meta(smoke_dir)
    assert d["tensors"] == 8 and d["modules"] == 4
    assert d["parameters"] == sum(t.numel() for t in _lora_tensors(smoke_dir).values())
    assert d["scaling"] == pytest.approx(2.0)
    assert _load(smoke_dir).describe()["lora"] is None

    two = _save(tmp_path / "qv.safetensors", _lora_tensors(smoke_dir, targets=["to_q", "to_v"]),
                _meta(smoke_dir, target_modules=["to_q", "to_v"]))
    d2 = _load(smoke_dir, lora=two).describe()["lora"]
    assert d2["modules"] == 2 and d2["tensors"] == 4 and d2["sha256"] != d["sha256"]


# --- bad files: a clear error, before any image is produced ---------------------------------------


def test_lora_for_another_backend_is_refused_before_the_model_loads(smoke_dir, tmp_path):
    path = _save(tmp_path / "og2.safetensors", _lora_tensors(smoke_dir), _meta(smoke_dir, backend="omnigen2"))
    before = loading.LOADS
    with pytest.raises(LoraFileError) as err:
        _load(smoke_dir, lora=path)
    msg = str(err.value)
    assert str(path) in msg and "'omnigen2'" in msg and f"'{BACKEND}'" in msg and "backend" in msg
    assert loading.LOADS == before


def test_file_without_metadata_names_the_file_and_the_key(smoke_dir, tmp_path):
    path = _save(tmp_path / "bare.safetensors", _lora_tensors(smoke_dir), None)
    before = loading.LOADS
    with pytest.raises(LoraFileError) as err:
        _load(smoke_dir, lora=path)
    assert str(path) in str(err.value) and LORA_METADATA_KEY in str(err.value)
    assert loading.LOADS == before


@pytest.mark.parametrize("raw, over, named", [
    ("{not json", None, "not valid JSON"),
    ('["a list"]', None, "JSON object"),
    ('{"rank": 4}', None, "lacks"),
    (None, {"rank": 0}, "fourloops.lora.rank = 0"),
    (None, {"rank": True}, "fourloops.lora.rank = True"),
    (None, {"alpha": -1}, "fourloops.lora.alpha = -1"),
    (None, {"target_modules": ["to_qkv"]}, "fourloops.lora.target_modules = ['to_qkv']"),
    (None, {"target_modules": []}, "fourloops.lora.target_modules = []"),
    (None, {"frozen_dtype": "fp16"}, "fourloops.lora.frozen_dtype = 'fp16'"),
])
def test_invalid_metadata_names_the_key_and_value(smoke_dir, tmp_path, raw, over, named):
    metadata = raw if raw is not None else _meta(smoke_dir, **over)
    path = _save(tmp_path / "bad.safetensors", _lora_tensors(smoke_dir), metadata)
    before = loading.LOADS
    with pytest.raises(LoraFileError) as err:
        _load(smoke_dir, lora=path)
    assert named in str(err.value) and str(path) in str(err.value)
    assert loading.LOADS == before


def test_missing_lora_tensors_are_named(smoke_dir, tmp_path):
    tensors = _lora_tensors(smoke_dir)
    dropped = "transformer_blocks.0.attn.to_v.lora_B.weight"
    del tensors[dropped]
    path = _save(tmp_path / "short.safetensors", tensors, _meta(smoke_dir))
    with pytest.raises(LoraFileError) as err:
        _load(smoke_dir, lora=path)
    msg = str(err.value)
    assert str(path) in msg and "missing" in msg and dropped in msg


def test_tensors_for_a_module_that_does_not_exist_are_named(smoke_dir, tmp_path):
    tensors = _lora_tensors(smoke_dir)
    extra = "transformer_blocks.5.attn.to_q.lora_A.weight"  # the tiny transformer has one block
    tensors[extra] = torch.ones(RANK, 32)
    path = _save(tmp_path / "extra.safetensors", tensors, _meta(smoke_dir))
    with pytest.raises(LoraFileError) as err:
        _load(smoke_dir, lora=path)
    msg = str(err.value)
    assert str(path) in msg and "match no LoRA module" in msg and extra in msg


def test_tensors_of_another_rank_are_refused_with_their_shapes(smoke_dir, tmp_path):
    path = _save(tmp_path / "rank.safetensors", _lora_tensors(smoke_dir, rank=RANK), _meta(smoke_dir, rank=2))
    with pytest.raises(LoraFileError) as err:
        _load(smoke_dir, lora=path)
    msg = str(err.value)
    assert str(path) in msg and "wrong shape" in msg and "rank 2" in msg and f"[{RANK}, 32]" in msg


def test_non_lora_or_non_finite_tensors_are_refused(smoke_dir, tmp_path):
    tensors = _lora_tensors(smoke_dir)
    tensors["transformer_blocks.0.attn.to_q.weight"] = torch.zeros(32, 32)  # a base weight, not an adapter
    path = _save(tmp_path / "base.safetensors", tensors, _meta(smoke_dir))
    with pytest.raises(LoraFileError, match="not LoRA A/B weights"):
        _load(smoke_dir, lora=path)
    tensors = _lora_tensors(smoke_dir)
    tensors["transformer_blocks.0.attn.to_q.lora_B.weight"][0, 0] = float("nan")
    path = _save(tmp_path / "nan.safetensors", tensors, _meta(smoke_dir))
    with pytest.raises(LoraFileError, match="not finite"):
        _load(smoke_dir, lora=path)


def test_absent_or_unreadable_file_is_clear(smoke_dir, tmp_path):
    with pytest.raises(LoraFileError, match="does not exist"):
        _load(smoke_dir, lora=tmp_path / "absent.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a safetensors file at all")
    with pytest.raises(LoraFileError, match="not a readable safetensors file"):
        _load(smoke_dir, lora=junk)


# --- the generate stage passes the job's `lora` input through -------------------------------------


def _stage_args(smoke_dir: Path, tmp_path: Path, lora: bool) -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    ref = tmp_path / "az000.png"
    _refs()[0].save(ref)
    out = tmp_path / "gen"
    return dict(
        references=[str(ref)], images_out=[str(out / "az090.png")], manifest_out=str(out / "views.json"),
        condition="L", prompt="the same person, camera orbited to {azimuth} degrees", lora=lora, azimuths=[90],
        seed=SEED, model_set="smoke", reference_azimuths=[0], machine="desk",
        generator={"backend": BACKEND, "model": str(smoke_dir), "revision": None, "precision": "fp32",
                   "device": "cpu", "steps": 2, "guidance": 4.0, "size": 128, "negative_prompt": None},
    )


def test_generate_stage_loads_the_lora_input_and_records_it(smoke_dir, lora_file, tmp_path):
    from fourloops.stages.generate import generate_stage

    args = _stage_args(smoke_dir, tmp_path, lora=True)
    fields = generate_stage(**args, lora_path=str(lora_file))
    manifest = read_json(args["manifest_out"])
    assert manifest["lora"] is True and manifest["model_loads"] == 1
    assert manifest["model"]["lora"]["sha256"] == sha256_file(lora_file)
    assert manifest["model"]["lora"]["path"] == str(lora_file)
    assert fields["models"][0]["lora"]["metadata"]["backend"] == BACKEND
    assert Path(args["images_out"][0]).is_file()

    plain = _stage_args(smoke_dir, tmp_path / "plain", lora=False)
    generate_stage(**plain)
    assert read_json(plain["manifest_out"])["model"]["lora"] is None
    assert Image.open(plain["images_out"][0]).tobytes() != Image.open(args["images_out"][0]).tobytes()


def test_generate_stage_refuses_a_missing_or_unasked_lora_and_writes_nothing(smoke_dir, tmp_path, lora_file):
    from fourloops.stages.generate import generate_stage

    args = _stage_args(smoke_dir, tmp_path, lora=True)
    with pytest.raises(ValueError, match="no input `lora`"):
        generate_stage(**args)
    with pytest.raises(ValueError, match="lora = false"):
        generate_stage(**{**args, "lora": False}, lora_path=str(lora_file))
    bad = _save(tmp_path / "og2.safetensors", _lora_tensors(smoke_dir), _meta(smoke_dir, backend="omnigen2"))
    with pytest.raises(LoraFileError, match="omnigen2"):
        generate_stage(**args, lora_path=str(bad))
    out = Path(args["manifest_out"]).parent
    assert not out.exists() or not [p for p in out.rglob("*") if p.is_file()]


def test_needs_ask_for_peft_only_for_a_lora_condition(smoke_dir, tmp_path):
    from fourloops.declarations.generate import needs

    args = _stage_args(smoke_dir, tmp_path, lora=True)
    job = {k: args[k] for k in ("condition", "prompt", "lora", "azimuths", "seed", "model_set", "generator",
                                "reference_azimuths")}
    with_lora = needs({"job": job})
    without = needs({"job": {**job, "lora": False}})
    assert [n for n in with_lora if n.kind == "package" and n.what == "peft"]
    assert not [n for n in without if n.what == "peft"]
    assert [n.key() for n in with_lora if n.what != "peft"] == [n.key() for n in without]


@pytest.mark.parametrize("with_lora", [True, False])
def test_the_script_passes_the_jobs_lora_input_and_none_without_it(monkeypatch, with_lora):
    """scripts/generate.py: `snakemake.input.lora` exists only for a lora condition; absent, the stage gets None."""
    import contextlib
    import runpy
    from types import SimpleNamespace

    from snakemake.iocontainers import InputFiles

    import fourloops.jobs
    import fourloops.stages.generate as stage

    files = ["results/render/az000.png"] + (["results/lora/camera.safetensors"] if with_lora else [])
    inputs = InputFiles(files)
    inputs._set_name("references", 0, 1)
    if with_lora:
        inputs._set_name("lora", 1)
    calls, recorded = [], []

    @contextlib.contextmanager
    def fake_job(smk):
        yield SimpleNamespace(record=lambda **fields: recorded.append(fields))

    monkeypatch.setattr(fourloops.jobs, "job", fake_job)
    monkeypatch.setattr(stage, "generate_stage", lambda **kw: calls.append(kw) or {"seed": 0})
    smk = SimpleNamespace(input=inputs, output=SimpleNamespace(images=["g/az090.png"], manifest="g/views.json"),
                          config={"machine": "desk"}, params=SimpleNamespace(job={"lora": with_lora}),
                          resources=SimpleNamespace(batch=1))
    runpy.run_path(str(Path(__file__).resolve().parents[1] / "scripts" / "generate.py"),
                   init_globals={"snakemake": smk})
    assert len(calls) == 1 and recorded == [{"seed": 0}]
    assert calls[0]["references"] == ["results/render/az000.png"]
    if with_lora:
        assert calls[0]["lora_path"] == "results/lora/camera.safetensors" and type(calls[0]["lora_path"]) is str
    else:
        assert calls[0]["lora_path"] is None
