"""Config checks that name the key, the value and what is allowed, before any job runs."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any, Iterable

import jsonschema
import yaml

# Ladder names that the table uses for its own rows; a condition may not take them.
RESERVED_SOURCES = ("floor", "floor_gt", "render")


class ConfigError(ValueError):
    """A config value that cannot run. The message names the key path, the value and what is allowed."""


def key_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<config>"


def _describe_allowed(error: jsonschema.ValidationError) -> str:
    schema, kind = error.schema, error.validator
    if kind == "enum":
        return f"one of {schema['enum']}"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        bounds = []
        for name, sym in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
            if name in schema:
                bounds.append(f"{sym} {schema[name]}")
        return "a number " + " and ".join(bounds)
    if kind == "type":
        return f"a value of type {schema['type']}"
    if kind == "additionalProperties" and schema.get("additionalProperties") is False:
        return f"only the keys {sorted(schema.get('properties', {}))}"
    if kind == "required":
        return f"the keys {schema['required']}"
    if kind in ("minItems", "minProperties"):
        return "a non-empty value"
    if kind == "pattern":
        return f"a string matching {schema['pattern']}"
    if "propertyNames" in error.schema_path:
        return "names matching ^[A-Za-z][A-Za-z0-9_]*$ other than " + ", ".join(RESERVED_SOURCES)
    if kind == "multipleOf":
        return f"a multiple of {schema['multipleOf']}"
    if kind == "uniqueItems":
        return "no repeated values"
    return error.message


def schema_errors(config: dict, schema: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    messages = []
    for error in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        path = key_path(error.absolute_path)
        if error.validator == "additionalProperties" and error.schema.get("additionalProperties") is False:
            extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            for name in extra:
                sub = f"{path}.{name}" if path != "<config>" else name
                messages.append(f"{sub}: unknown key; allowed: {_describe_allowed(error)}")
            continue
        if "propertyNames" in error.schema_path:
            messages.append(f"{path}: key {error.instance!r} is not allowed; allowed: {_describe_allowed(error)}")
            continue
        messages.append(f"{path} = {error.instance!r}: not allowed; allowed: {_describe_allowed(error)}")
    return messages


def load_schema(path: str | Path) -> dict:
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def semantic_errors(config: dict, backends: Iterable[str], smoke_backends: Iterable[str]) -> list[str]:
    """Checks JSON Schema cannot express. Expects defaults already filled in."""
    messages = []
    azimuths = list(config["azimuths"])
    gen = config["generator"]
    if gen["backend"] not in backends:
        messages.append(f"generator.backend = {gen['backend']!r}: not allowed; allowed: one of {list(backends)}")
    if gen["precision"] == "nf4" and gen["device"] == "cpu":
        messages.append(
            "generator.precision = 'nf4': not allowed with generator.device = 'cpu'; "
            "allowed: fp32 or bf16 on cpu (nf4 needs bitsandbytes on CUDA)"
        )
    smoke_backend = config["smoke"]["generator_backend"]
    if smoke_backend not in smoke_backends:
        messages.append(
            f"smoke.generator_backend = {smoke_backend!r}: no tiny model can be built for it; "
            f"allowed: one of {list(smoke_backends)}"
        )
    for name, cond in config["conditions"].items():
        for i, ref in enumerate(cond["references"]):
            if ref not in azimuths:
                messages.append(
                    f"conditions.{name}.references[{i}] = {ref}: no render at that azimuth; "
                    f"allowed: one of azimuths {azimuths}"
                )
        fields = [f for _, f, _, _ in string.Formatter().parse(cond["prompt"]) if f is not None]
        unknown = [f for f in fields if f != "azimuth"]
        if unknown:
            messages.append(
                f"conditions.{name}.prompt = {cond['prompt']!r}: unknown placeholder(s) {unknown}; allowed: {{azimuth}}"
            )
        elif "azimuth" not in fields:
            messages.append(
                f"conditions.{name}.prompt = {cond['prompt']!r}: the template must contain {{azimuth}}"
            )
        if cond.get("lora", False):
            messages.append(
                f"conditions.{name}.lora = true: the camera LoRA rule does not exist in this workflow yet, "
                "so a LoRA condition cannot run; allowed: false"
            )
    return messages


def check_config(
    config: dict, schema_path: str | Path, backends: Iterable[str], smoke_backends: Iterable[str], fill_defaults
) -> dict:
    """Validate `config` in place: schema (clear messages), then defaults, then cross-key checks.

    `fill_defaults(config, schema_path)` fills schema defaults (snakemake.utils.validate in the workflow).
    Raises ConfigError listing every problem found.
    """
    schema = load_schema(schema_path)
    problems = schema_errors(config, schema)
    if not problems:
        fill_defaults(config, str(schema_path))
        problems = semantic_errors(config, list(backends), list(smoke_backends))
    if problems:
        raise ConfigError(
            "invalid config (nothing was run or written):\n  " + "\n  ".join(problems)
        )
    return config


def schema_with_slices(main: str | Path, slices: str | Path) -> dict:
    """The experiment schema with each stage's own slice (`config/schema.d/<key>.yaml`, the schema of
    `config[<key>]`) added as a top-level property: a new stage brings its config keys in its own file."""
    schema = load_schema(main)
    for path in sorted(Path(slices).glob("*.yaml")) if Path(slices).is_dir() else []:
        key = path.stem
        if key in schema.get("properties", {}):
            raise ConfigError(f"{path}: config key {key!r} is already defined by {main}; allowed: a new key")
        schema.setdefault("properties", {})[key] = load_schema(path)
    return schema
