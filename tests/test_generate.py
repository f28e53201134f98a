"""Tests of fourloops.generate on the tiny smoke pipeline (CPU, one thread, no network)."""

from __future__ import annotations

import io as _io
import os
import shutil
import socket
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing in these tests may reach a model hub

import numpy as np
import pytest
import torch
from PIL import Image

from fourloops import generate as G
from fourloops import hub, loading
from fourloops.backends import BACKENDS
from fourloops.io import read_json, sha256_file
from fourloops.smoke_generators import build_smoke_generator

torch.set_num_threads(1)

BACKEND = "qwen_image_edit_plus"
SEED = 0
SETTINGS = {"num_inference_steps": 2, "guidance": 4.0, "width": 128, "height": 128, "negative_prompt": None}
PROMPT = "the same person, camera orbited to {azimuth} degrees"


def _refs(n: int, size: int = 128) -> list[Image.Image]:
    return [Image.fromarray(np.random.RandomState(i).randint(0, 256, (size, size, 3), dtype=np.uint8))
            for i in range(n)]


def _png(image: Image.Image) -> bytes:
    buf = _io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _file_hashes(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def smoke_dir(smoke_generator_dir) -> Path:
    """The session's smoke pipeline (conftest.smoke_generator_dir: BACKEND at SEED)."""
    assert (smoke_generator_dir.name, read_json(smoke_generator_dir / "smoke.json")["seed"]) == (BACKEND, SEED)
    return smoke_generator_dir


@pytest.fixture(scope="session")
def generator(smoke_dir):
    return G.load_backend(BACKEND, str(smoke_dir), None, "fp32", "cpu", SETTINGS)


@pytest.fixture
def no_network(monkeypatch):
    """Fail any attempt to open a network connection."""
    attempts = []

    def refuse(self, address, *args, **kwargs):
        attempts.append(address)
        raise OSError(f"test forbids network access (tried {address!r})")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


# --- the smoke model set ------------------------------------------------------------------------


def test_smoke_build_writes_metadata_and_is_deterministic(smoke_dir, tmp_path):
    meta = read_json(smoke_dir / "smoke.json")
    assert meta == {"model_set": "smoke", "backend": BACKEND, "seed": SEED, "built_by": "fourloops.smoke_generators"}
    assert (smoke_dir / "model_index.json").is_file()
    again = tmp_path / "again"
    assert build_smoke_generator(BACKEND, str(again), SEED) == meta
    assert _file_hashes(again) == _file_hashes(smoke_dir)
    other = tmp_path / "other"
    build_smoke_generator(BACKEND, str(other), SEED + 1)
    weights = "transformer/diffusion_pytorch_model.safetensors"
    assert sha256_file(other / weights) != sha256_file(smoke_dir / weights)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftover partial dirs


def test_smoke_build_refuses_omnigen2_and_unknown(tmp_path):
    with pytest.raises(ValueError, match="omnigen2"):
        build_smoke_generator("omnigen2", str(tmp_path / "o"), SEED)
    with pytest.raises(ValueError, match="nope"):
        build_smoke_generator("nope", str(tmp_path / "n"), SEED)
    assert not (tmp_path / "o").exists()


# --- loading -------------------------------------------------------------------------------------


def test_loads_from_saved_dir(generator, smoke_dir):
    d = generator.describe()
    assert d["backend"] == BACKEND
    assert d["model"] == str(smoke_dir)
    assert d["pipeline_class"].endswith("QwenImageEditPlusPipeline")
    assert d["model_index_class"] == "QwenImageEditPlusPipeline"
    assert d["precision"] == "fp32" and d["device"] == "cpu"
    assert d["revision_kind"] == "local_dir_sha256" and len(d["revision"]) == 64
    assert d["revision"] == hub.local_dir_digest(smoke_dir)
    assert 0 < d["parameters"] < 1_000_000
    assert d["parameters"] == sum(d["parameters_by_component"].values())


def test_loads_counted_once_per_load_not_per_generate(smoke_dir, generator):
    before = loading.LOADS
    g = G.load_backend(BACKEND, str(smoke_dir), None, "fp32", "cpu", SETTINGS)
    assert loading.LOADS == before + 1
    first = g.generate(_refs(1), PROMPT.format(azimuth=90), SEED)
    g.generate(_refs(1), PROMPT.format(azimuth=180), SEED)
    assert loading.LOADS == before + 1
    # a fresh load of the same directory gives the same bytes as the session's generator
    assert _png(first) == _png(generator.generate(_refs(1), PROMPT.format(azimuth=90), SEED))


def test_unknown_backend_names_it_and_the_allowed_ones(smoke_dir):
    before = loading.LOADS
    with pytest.raises(ValueError) as err:
        G.load_backend("dalle", str(smoke_dir), None, "fp32", "cpu", SETTINGS)
    assert "dalle" in str(err.value)
    for name in BACKENDS:
        assert name in str(err.value)
    assert loading.LOADS == before


def test_omnigen2_without_package_is_unavailable_with_install_hint(monkeypatch, smoke_dir):
    monkeypatch.setitem(sys.modules, "omnigen2", None)  # makes `import omnigen2...` fail even if installed
    before = loading.LOADS
    with pytest.raises(hub.GeneratorUnavailable) as err:
        G.load_backend("omnigen2", str(smoke_dir), None, "fp32", "cpu", SETTINGS)
    msg = str(err.value)
    assert "omnigen2" in msg and "VectorSpaceLab/OmniGen2" in msg
    assert loading.OMNIGEN2_COMMIT in msg and "git" in msg
    assert loading.LOADS == before


def test_nf4_on_cpu_is_refused(smoke_dir):
    before = loading.LOADS
    with pytest.raises(ValueError, match=r"nf4.*CUDA"):
        G.load_backend(BACKEND, str(smoke_dir), None, "nf4", "cpu", SETTINGS)
    assert loading.LOADS == before


def test_bad_settings_are_refused(smoke_dir):
    with pytest.raises(ValueError, match="lack"):
        G.load_backend(BACKEND, str(smoke_dir), None, "fp32", "cpu", {"width": 128})
    with pytest.raises(ValueError, match="unknown generator settings"):
        G.load_backend(BACKEND, str(smoke_dir), None, "fp32", "cpu", {**SETTINGS, "guidance_scale": 3})
    with pytest.raises(ValueError, match="multiples of 32"):  # the smoke VAE downsamples 16x, packing 2x
        G.load_backend(BACKEND, str(smoke_dir), None, "fp32", "cpu", {**SETTINGS, "width": 144})


def test_missing_local_dir_is_clear(tmp_path):
    with pytest.raises(hub.GeneratorUnavailable, match="does not exist"):
        G.load_backend(BACKEND, str(tmp_path / "absent"), None, "fp32", "cpu", SETTINGS)


def test_hub_id_not_in_cache_fails_clearly_without_network(monkeypatch, tmp_path, no_network):
    import huggingface_hub.constants as hc

    hf_home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setattr(hc, "HF_HOME", str(hf_home))
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(hf_home / "hub"))
    before = loading.LOADS
    with pytest.raises(hub.ModelNotCached) as err:
        G.load_backend(BACKEND, "Qwen/Qwen-Image-Edit-2509", "abc123", "fp32", "cpu", SETTINGS)
    msg = str(err.value)
    assert "Qwen/Qwen-Image-Edit-2509" in msg and "abc123" in msg and str(hf_home) in msg
    assert isinstance(err.value, hub.GeneratorUnavailable)
    assert no_network == [] and loading.LOADS == before


def test_hub_id_loads_from_cache_snapshot(monkeypatch, tmp_path, smoke_dir, no_network):
    """A hub id resolves to its cached snapshot (same from_pretrained path) and reports the commit."""
    import huggingface_hub.constants as hc

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--fourloops--smoke-qwen"
    shutil.copytree(smoke_dir, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "hub"))
    g = G.load_backend(BACKEND, "fourloops/smoke-qwen", None, "fp32", "cpu", SETTINGS)
    d = g.describe()
    assert d["model_source"] == "hub_cache" and d["revision"] == commit and d["revision_kind"] == "hub_commit"
    assert no_network == []


# --- generation ----------------------------------------------------------------------------------


def test_same_seed_same_bytes_other_seed_other_image(generator):
    refs = _refs(2)
    prompt = PROMPT.format(azimuth=45)
    a = _png(generator.generate(refs, prompt, 7))
    b = _png(generator.generate(refs, prompt, 7))
    c = _png(generator.generate(refs, prompt, 8))
    assert a == b
    assert a != c


@pytest.mark.parametrize("n_refs", [1, 2, 3])
def test_accepts_one_two_three_references(generator, n_refs):
    out = generator.generate(_refs(n_refs), PROMPT.format(azimuth=90), SEED)
    assert isinstance(out, Image.Image) and out.mode == "RGB" and out.size == (128, 128)


def test_output_size_honours_settings(smoke_dir):
    settings = {**SETTINGS, "width": 160, "height": 96}
    g = G.load_backend(BACKEND, str(smoke_dir), None, "fp32", "cpu", settings)
    out = g.generate(_refs(1, size=128), PROMPT.format(azimuth=30), SEED)
    assert out.size == (160, 96) and out.mode == "RGB"


def test_generate_rejects_bad_inputs(generator):
    with pytest.raises(ValueError):
        generator.generate([], "x", 0)
    with pytest.raises(ValueError):
        generator.generate([np.zeros((8, 8, 3))], "x", 0)
    with pytest.raises(ValueError):
        generator.generate(_refs(1), "x", 1.5)


def test_only_a_pod_fetches_a_missing_hub_model(monkeypatch, tmp_path):
    """The executor sets FOURLOOPS_FETCH_MODELS=1 in a pod's environment; elsewhere nothing downloads."""
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    calls = []

    def fake_snapshot_download(repo_id, revision=None, local_files_only=False, **_):
        calls.append(local_files_only)
        if local_files_only:
            raise LocalEntryNotFoundError("not cached")
        snap = tmp_path / "snapshots" / "0123abcd"
        snap.mkdir(parents=True, exist_ok=True)
        return str(snap)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    monkeypatch.delenv(hub.FETCH_ENV, raising=False)
    with pytest.raises(hub.ModelNotCached):
        hub.resolve_model("OmniGen2/OmniGen2", "main")
    assert calls == [True]
    monkeypatch.setenv(hub.FETCH_ENV, "1")
    path, info = hub.resolve_model("OmniGen2/OmniGen2", "main")
    assert calls == [True, True, False]
    assert info == {"source": "hub_download", "resolved_revision": "0123abcd"} and path.name == "0123abcd"


def test_omnigen2_prompt_encodings_a_job_keeps_hold_no_autograd_graph():
    """A generate job measures its prompts (`text_length`) before any pipeline call and keeps each encoding for its
    views: made with autograd on, each would keep the MLLM's activations for a backward that never comes (on a GPU, a
    prompt's worth of memory a view). The stand-in pipe encodes with a weight that takes gradients, as a loaded MLLM's
    do; the package-free part of OmniGen2's path."""
    weight = torch.nn.Parameter(torch.ones(4, 4))

    class Pipe:
        _execution_device = "cpu"

        def _apply_chat_template(self, prompt):
            return prompt

        def _get_qwen2_prompt_embeds(self, prompt, device, max_sequence_length):
            tokens = torch.ones(1, len(prompt[0].split()), 4)
            return tokens @ weight, torch.ones(1, tokens.shape[1], dtype=torch.long)

    gen = G.Generator("omnigen2", "stand-in", Path("."), {}, "fp32", "cpu", {}, Pipe())
    assert gen.text_length(["a person seen from 45 degrees", "a person from 0"]) == 6
    for embeds, _ in gen._text_embeds.values():
        assert embeds.grad_fn is None and not embeds.requires_grad
