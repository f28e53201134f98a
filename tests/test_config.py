"""Config checks: every problem names its key path, the value and what is allowed."""

import copy
from pathlib import Path

import pytest
import yaml

from fourloops.backends import BACKENDS, SMOKE_BACKENDS
from fourloops.config import ConfigError, check_config, load_schema

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "config" / "schema.yaml"


def fill_defaults(config, schema_path):
    from snakemake.utils import validate

    validate(config, schema_path)


def base_config():
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def check(config):
    return check_config(config, SCHEMA, BACKENDS, SMOKE_BACKENDS, fill_defaults)


def test_shipped_config_is_valid():
    check(base_config())


def test_empty_config_gets_every_default():
    cfg = check({})
    assert cfg["azimuths"] == list(range(0, 360, 45))
    assert cfg["generator"]["backend"] == "omnigen2"
    assert cfg["render"]["camera"]["distance_m"] == 3.2
    assert set(cfg["conditions"]) == {"A", "B", "C", "D"}
    assert cfg["conditions"]["A"]["lora"] is False
    assert cfg["conditions"]["D"]["lora"] is True  # A with the camera LoRA (rules/lora.smk)


def test_every_schema_key_has_description_and_default():
    def walk(node, path):
        for name, sub in node.get("properties", {}).items():
            where = f"{path}.{name}" if path else name
            assert "description" in sub, where
            assert "default" in sub, where
            walk(sub, where)

    walk(load_schema(SCHEMA), "")


def test_schema_backend_enum_matches_the_library():
    schema = load_schema(SCHEMA)
    assert tuple(sorted(schema["properties"]["generator"]["properties"]["backend"]["enum"])) == tuple(sorted(BACKENDS))
    assert tuple(schema["properties"]["smoke"]["properties"]["generator_backend"]["enum"]) == SMOKE_BACKENDS


@pytest.mark.parametrize(
    "mutate,expect",
    [
        (lambda c: c["generator"].update(backend="dalle"), "generator.backend = 'dalle'"),
        (lambda c: c.update(azimuths=[0, 360]), "azimuths[1] = 360"),
        (lambda c: c["conditions"]["B"].update(references=[]), "conditions.B.references = []"),
        (lambda c: c["conditions"]["B"].update(references=[0, 91]), "conditions.B.references[1] = 91"),
        (lambda c: c["conditions"]["A"].update(prompt="turn to {angle}"), "conditions.A.prompt"),
        (lambda c: c["generator"].update(precision="nf4", device="cpu"), "generator.precision = 'nf4'"),
        (lambda c: c["render"].update(colour=1), "render.colour: unknown key"),
        (lambda c: c["conditions"].update(floor={"references": [0], "prompt": "{azimuth}"}), "key 'floor'"),
    ],
)
def test_bad_values_are_named(mutate, expect):
    cfg = base_config()
    mutate(cfg)
    before = copy.deepcopy(cfg)
    with pytest.raises(ConfigError) as err:
        check(cfg)
    assert expect in str(err.value)
    assert "nothing was run" in str(err.value)
    if "unknown key" not in expect:
        assert "allowed" in str(err.value) or "must" in str(err.value)
    assert cfg == before or cfg.keys() >= before.keys()
