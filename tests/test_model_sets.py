"""The smoke and sizing sets' stand-ins (fourloops.model_sets), without Snakemake: the smoke set loads only the
tiny models the workflow builds, on the CPU; the sizing set loads the declared random-weight builds with the
configured precision; the real set loads what the config names, and reads no built model."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import REPO
from fourloops import model_sets
from fourloops.backends import BACKENDS, SMOKE_BACKENDS
from fourloops.config import check_config, schema_with_slices
from fourloops.stage import builds

COMPONENTS = ("generator", "detector", "scorer")


@pytest.fixture(scope="module")
def configs(tmp_path_factory) -> dict[str, dict]:
    """The shipped config, defaults filled by the schema check, per model set."""
    from snakemake.utils import validate

    schema = tmp_path_factory.mktemp("schema") / "schema.yaml"
    schema.write_text(yaml.safe_dump(schema_with_slices(REPO / "config" / "schema.yaml", REPO / "config" / "schema.d")))
    out = {}
    for model_set in ("smoke", "sizing", "real"):
        config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
        config["model_set"] = model_set
        check_config(config, schema, BACKENDS, SMOKE_BACKENDS, lambda c, p: validate(c, p))
        out[model_set] = config
    return out


def _settings(config: dict) -> dict[str, dict]:
    return {"generator": model_sets.generator(config), "detector": model_sets.detector(config),
            "scorer": model_sets.scorer(config), "lora_train": model_sets.lora_train(config),
            "text_encoder": model_sets.lora_embeddings(config)}


def _model_paths(s: dict) -> list[str]:
    return [s[k] for k in ("model", "weights", "base", "adapter") if k in s]


def test_the_smoke_set_loads_only_the_built_tiny_models_on_the_cpu(configs):
    config = configs["smoke"]
    for name, s in _settings(config).items():
        assert s["device"] == "cpu", name
        assert all(p.startswith("models/smoke/") for p in _model_paths(s)), (name, s)
        assert s.get("revision") is None and s.get("base_revision") is None, name
    settings = _settings(config)
    assert settings["generator"]["precision"] == settings["scorer"]["precision"] == "fp32"
    assert settings["generator"]["backend"] in SMOKE_BACKENDS
    assert settings["lora_train"]["frozen_dtype"] == "fp32" and model_sets.lora_text_encoder_dtype(config) == "fp32"
    assert settings["lora_train"]["steps"] == config["lora"]["smoke"]["steps"]
    assert model_sets.lora_records(config)["count"] == config["lora"]["smoke"]["count"]
    for component in COMPONENTS:  # a job reads the model it loads, so a rebuilt one makes it stale
        assert set(model_sets.built_models(config, component).values()) <= set(_model_paths(settings[component]) +
                                                                            [model_sets.SMOKE_SCORER_DIR])


def test_the_sizing_set_loads_the_declared_builds_at_the_configured_precision(configs):
    config = configs["sizing"]
    declared = set(builds())
    settings = _settings(config)
    for component in COMPONENTS:
        s = settings[component]
        for path in _model_paths(s):
            parts = Path(path).parts
            assert parts[:2] == ("models", "sizing") and parts[2] in declared, (component, path)
        assert s.get("revision") is None and s.get("base_revision") is None
        built = model_sets.built_models(config, component)
        assert len(built) == 1 and Path(next(iter(built.values()))).parts[2] in declared
    assert settings["generator"]["precision"] == config["generator"]["precision"]
    assert settings["scorer"]["precision"] == config["grades"]["precision"]
    assert settings["detector"]["device"] == config["keypoints"]["device"]
    assert model_sets.lora_records(config) == config["lora"]["records"]


def test_the_real_set_loads_what_the_config_names_and_reads_no_built_model(configs):
    config = configs["real"]
    settings = _settings(config)
    assert settings["generator"] == config["generator"]
    assert settings["scorer"]["base"] == config["grades"]["scorer"]
    assert settings["scorer"]["adapter_revision"] == config["grades"]["adapter_revision"]
    assert "~" not in settings["detector"]["weights"]
    assert settings["lora_train"]["device"] == config["lora"]["device"]
    assert all(model_sets.built_models(config, c) == {} for c in COMPONENTS)


def test_a_component_without_a_built_model_is_named(configs):
    with pytest.raises(ValueError, match="component = 'lamp'; allowed: generator, detector, scorer"):
        model_sets.built_models(configs["smoke"], "lamp")


def test_the_real_detectors_params_carry_its_checkpoints_bytes(configs, tmp_path, monkeypatch):
    """A user's checkpoint is no job's output, so the output check leaves it alone: replaced at the same path, it
    would stale nothing. Its sha256 in the params makes the keypoints and HEF jobs that read it run again."""
    import hashlib

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the digest cache lives under ~/.cache/fourloops
    ckpt = tmp_path / "rfdetr.pth"
    config = {**configs["real"], "keypoints": {**configs["real"]["keypoints"], "weights": str(ckpt)}}
    assert model_sets.detector(config)["weights_sha256"] is None  # no file: the preflight names it
    for data in (b"first checkpoint", b"another checkpoint"):
        ckpt.write_bytes(data)
        assert model_sets.detector(config)["weights_sha256"] == hashlib.sha256(data).hexdigest()
    assert "weights_sha256" not in model_sets.detector(configs["smoke"])  # a built model is a job's input instead


# One parse of the real workflow by Snakemake's API: the params Snakemake gives each job that loads a model, and the
# ladder's lineage digest (what staleness follows downstream), as JSON on the last line.
_PARSE = '''
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
from fourloops.smk import workflow_of
repo, workdir, configfile = sys.argv[1:4]
with SnakemakeApi(OutputSettings()) as api:
    wf = api.workflow(resource_settings=ResourceSettings(), config_settings=ConfigSettings(configfiles=[Path(configfile)]),
                      snakefile=Path(repo) / "Snakefile", workdir=Path(workdir))._workflow
    view, style = workflow_of(wf), next(iter(wf.config["restyle"]["styles"]))
    jobs = {"generate": {"condition": "D"}, "restyle": {"style": style}, "lora_embeddings": {}, "lora_train": {},
            "grades": {"style": style}}
    out = {rule: view.jobs.params(rule, wc).get("local_weights") for rule, wc in jobs.items()}
    print(json.dumps({**out, "ladder lineage": view.jobs.lineage("ladder", {})}))
'''


def test_local_weight_directories_on_the_real_set_stale_the_jobs_that_load_them(configs, tmp_path):
    """A generator or scorer given as a local directory is no job's output, so the output check leaves it alone and
    no revision names it: its digest in the params of the jobs that load it (the figure their provenance records)
    makes other weights at the same path stale them and everything downstream. Hub ids and the built sets gain no
    param, so none of their jobs reruns."""
    import json
    import subprocess
    import sys

    from conftest import snakemake_env
    from fourloops.hub import local_dir_digest

    assert all(model_sets.local_weights(configs[s], c) == {} for s in ("smoke", "sizing", "real")
               for c in ("generator", "scorer"))  # the shipped config names hub ids
    gen, base, adapter = (tmp_path / "weights" / name for name in ("generator", "scorer", "adapter"))
    for d, files in ((gen, {"config.json": b"{}", "transformer/model.safetensors": b"first weights",
                            ".cache/huggingface/download.lock": b"not weights"}),
                     (base, {"config.json": b"{}"}), (adapter, {"adapter_model.safetensors": b"lora"})):
        for rel, data in files.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_bytes(data)
    configfile = tmp_path / "local.yaml"
    configfile.write_text(yaml.safe_dump({"model_set": "real", "generator": {"model": str(gen)},
                                          "grades": {"scorer": str(base), "adapter": str(adapter)}}))
    env = snakemake_env(HOME=str(tmp_path / "home"))  # the digests' cache lives under ~/.cache/fourloops

    def parse() -> tuple[dict, str]:
        proc = subprocess.run([sys.executable, "-c", _PARSE, str(REPO), str(tmp_path), str(configfile)],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr

    def said(d: Path) -> dict:  # the loaders' own digest, each file read (fourloops.hub)
        return {"path": str(d), "sha256": local_dir_digest(d)}

    first, err = parse()
    loads_generator = ("generate", "restyle", "lora_embeddings", "lora_train")
    assert all(first[rule] == {"generator": said(gen)} for rule in loads_generator), first
    assert first["grades"] == {"scorer": said(base), "adapter": said(adapter)}
    assert f"reading the sha256 of 2 of the 2 file(s) of {gen} " in err  # the hidden download lock is no weight

    (gen / "transformer" / "model.safetensors").write_bytes(b"other weights")  # the same size, at the same path
    second, err = parse()
    assert all(second[rule] == {"generator": said(gen)} != first[rule] for rule in loads_generator)
    assert second["grades"] == first["grades"] and second["ladder lineage"] != first["ladder lineage"]
    assert f"reading the sha256 of 1 of the 2 file(s) of {gen} " in err  # the unchanged file came from the cache

    third, err = parse()
    assert third == second and "reading the sha256" not in err  # every file from the cache: a parse stats, reads none


def test_weights_behind_a_symlinked_subdirectory_stale_too_and_a_checkpoint_path_that_is_no_file_is_none(tmp_path,
                                                                                                        monkeypatch):
    """A hand-assembled model directory links its transformer from elsewhere: the weights behind the link are in the
    digest (the jobs' own record does not enter the link); a link back up the tree is read once. A checkpoint path
    that is a directory gives no digest instead of a traceback at parse time (the preflight names it)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    model, elsewhere = tmp_path / "model", tmp_path / "elsewhere"
    (model / "vae").mkdir(parents=True)
    elsewhere.mkdir()
    (model / "config.json").write_text("{}")
    (model / "transformer").symlink_to(elsewhere, target_is_directory=True)
    (model / "vae" / "up").symlink_to(model, target_is_directory=True)
    digests = []
    for data in (b"weights", b"others!"):
        (elsewhere / "model.safetensors").write_bytes(data)
        model_sets._sha256s.cache_clear()
        digests.append(model_sets.local_dir_sha256(str(model)))
    assert None not in digests and digests[0] != digests[1]
    assert model_sets.checkpoint_sha256(str(model)) is None
