"""The preflight reads headers, never loads: a checkpoint or model directory is what it claims, or is named."""

from __future__ import annotations

import json
import zipfile

import pytest
import torch
from safetensors.torch import save_file

from fourloops.filecheck import checkpoint_problem, model_dir_problem
from fourloops.preflight import Need, check


def test_a_torch_checkpoint_passes(tmp_path):
    path = tmp_path / "w.pth"
    torch.save({"model": {"w": torch.zeros(2)}}, path)
    assert checkpoint_problem(path) is None


BAD_CHECKPOINTS = {
    "missing": (None, "does not exist"),
    "text": (b"root:x:0:0:root:/root:/bin/bash\n", "is not a torch checkpoint"),
    "empty": (b"", "is not a torch checkpoint"),
    "zip_without_pickle": ("zip", "without data.pkl"),
    "truncated_zip": ("truncated", "damaged zip archive"),
    "safetensors_truncated": ("st-truncated", "truncated"),
    "safetensors_not_json": ("st-garbage", "header"),
}


@pytest.mark.parametrize("case", BAD_CHECKPOINTS, ids=list(BAD_CHECKPOINTS))
def test_what_is_not_a_checkpoint_is_named(tmp_path, case):
    content, words = BAD_CHECKPOINTS[case]
    path = tmp_path / ("w.safetensors" if case.startswith("safetensors") else "w.pth")
    if content == "zip":
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("archive/other.txt", "x")
    elif content == "truncated":
        torch.save({"w": torch.zeros(1000)}, path)
        path.write_bytes(path.read_bytes()[:200])
    elif content == "st-truncated":
        save_file({"w": torch.zeros(1000)}, str(path))
        path.write_bytes(path.read_bytes()[:-100])
    elif content == "st-garbage":
        path.write_bytes((40).to_bytes(8, "little") + b"{not json" + b" " * 40)
    elif content is not None:
        path.write_bytes(content)
    assert words in checkpoint_problem(path)


def test_the_preflight_names_a_file_that_exists_but_is_no_checkpoint(tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    msg = check(Need("checkpoint", str(passwd), rule="keypoints"))
    assert msg.startswith(f"weights {passwd} (rule keypoints): is not a torch checkpoint"), msg
    assert "keypoints.weights" in msg


def test_a_model_directory_is_checked_by_its_index_and_weight_headers(tmp_path):
    assert "neither model_index.json" in model_dir_problem(tmp_path)
    (tmp_path / "model_index.json").write_text(json.dumps({"transformer": ["diffusers", "X"], "_class_name": "P"}))
    (tmp_path / "transformer").mkdir()
    save_file({"w": torch.zeros(100)}, str(tmp_path / "transformer" / "model.safetensors"))
    assert model_dir_problem(tmp_path) is None
    weights = tmp_path / "transformer" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8])
    assert "transformer/model.safetensors: truncated" in model_dir_problem(tmp_path)
    (tmp_path / "model_index.json").write_text("{")
    assert "model_index.json is not JSON" in model_dir_problem(tmp_path)


def test_a_model_the_run_builds_is_not_missing_nor_unpinned_before_it_exists(tmp_path):
    """2026-12-02 on the H200: `snakemake probe` refused the sizing scorer as an unpinned hub id before its build."""
    from fourloops.preflight import Need, problems
    from fourloops.declarations.grades import scorer_needs

    base, adapter = tmp_path / "models/sizing/scorer/base", tmp_path / "models/sizing/scorer/adapter"
    needs = scorer_needs({"device": "cpu", "precision": "bf16", "base": str(base), "base_revision": None,
                          "adapter": str(adapter), "adapter_revision": None}, "probe_model")
    assert [n.kind for n in needs] == ["device", "model_dir", "adapter_dir"]  # paths: directories, not hub ids
    assert problems(needs, built=[str(tmp_path / "models/sizing/scorer")]) == []
    lines = problems(needs + [Need("unpinned", "org/other", "grades.scorer_revision", rule="grades")],
                     built=[str(tmp_path / "models/sizing/scorer")])
    assert len(lines) == 1 and "config grades.scorer_revision is not set (rule grades)" in lines[0]


def test_a_hub_model_runs_only_at_a_commit_and_a_pinned_one_missing_from_the_cache_names_it(tmp_path, monkeypatch):
    """The generator's default `main` loaded whatever the hub's owner pointed it at: a rerun or a pod's download
    could load other weights under the same params. A branch, a tag or a short hash is refused with its key."""
    import huggingface_hub.constants as hc
    import yaml

    from conftest import COMMIT, REPO
    from fourloops.preflight import generator_needs, hub_need

    hf_home = tmp_path / "empty-hf-home"
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setattr(hc, "HF_HOME", str(hf_home))
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(hf_home / "hub"))
    generator = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["generator"]
    default = [n for n in generator_needs(generator, "generate") if n.kind == "unpinned"]
    assert [check(n) for n in default] == [
        "config generator.revision is not set (rule generate): pin the hub commit of OmniGen2/OmniGen2 "
        "(`hf download OmniGen2/OmniGen2` prints the snapshot path; its last part is the commit)"]
    for moving in ("main", "v1.0", "0f72fa9"):
        assert f"config generator.revision = {moving!r} is not a commit" in check(
            hub_need("OmniGen2/OmniGen2", moving, "generator.revision", "generate"))
    absent = str(tmp_path / "omnigen2")  # a local path, not a hub id: named as a directory, no revision asked
    weights = [n for n in generator_needs({**generator, "model": absent}, "generate") if n.what == absent]
    assert [n.kind for n in weights] == ["model_dir"] and absent in check(weights[0])
    commit = COMMIT
    pinned = hub_need("OmniGen2/OmniGen2", commit, "generator.revision", "generate")
    assert (pinned.kind, pinned.revision) == ("hf_model", commit)
    text = check(pinned)
    assert str(hf_home) in text and f"hf download OmniGen2/OmniGen2 --revision {commit}" in text


def test_a_local_directory_takes_no_revision_and_an_adapter_directory_is_checked_as_one(tmp_path):
    """The loader refuses a revision given for a local directory, but only inside the GPU job: the preflight names
    it with its key first. An adapter directory (config grades.adapter) is checked as a PEFT adapter, under its
    own key, not asked for a hub commit."""
    from conftest import COMMIT
    from fourloops.declarations.grades import scorer_needs
    from fourloops.preflight import CONFIG_KINDS, generator_needs

    model = tmp_path / "omnigen2"
    model.mkdir()
    gen = {"device": "cpu", "backend": "qwen_image_edit", "model": str(model), "revision": COMMIT}
    [weights] = [n for n in generator_needs(gen, "generate") if n.what == str(model)]
    assert weights.kind in CONFIG_KINDS and check(weights) == (
        f"config generator.revision = '{COMMIT}' was given for the local directory {model} (rule generate); a "
        "revision pins a hub id, and a directory is pinned by its bytes: set generator.revision to null, or name "
        "the hub id instead of the directory")
    adapter = tmp_path / "my-adapter"
    s = {"device": "cpu", "precision": "bf16", "base": "Qwen/Qwen3-VL-8B-Instruct", "base_revision": COMMIT,
         "adapter": str(adapter), "adapter_revision": None}
    [need] = [n for n in scorer_needs(s, "grades") if n.what == str(adapter)]
    assert check(need) == (f"adapter directory {adapter} (config grades.adapter, rule grades): does not exist (or is "
                           "not a directory); point grades.adapter at a PEFT adapter directory or a Hugging Face id")
    adapter.mkdir()
    assert "holds no adapter_config.json" in check(need)
    (adapter / "adapter_config.json").write_text("{}")
    assert check(need) is None
