"""Reading and checking the project's YAML files: duplicate keys refused, malformed files named by
file and line, and JSON Schema errors worded as `key = value: not allowed; allowed: ...`.

The validator is Draft 2020-12 with two stricter types: `number` is finite (NaN and infinity are
refused by name; JSON Schema bounds are false for NaN, so NaN would pass every minimum/maximum),
and `integer` is an int (not 2.0, not 1e23 read as a float, not a bool).
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import copy
import math
import re
from pathlib import Path
from typing import Any, Iterable

import jsonschema
import yaml


class YamlError(ValueError):
    """A YAML file that cannot be used: the message names the file, the line and the problem."""


# ------------------------------------------------------------------------------------- reading
class _Strict:
    """A SafeLoader that refuses a key given twice in one mapping (PyYAML silently keeps the last)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base class reports it
                    break
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None,
                        f"key {key!r} appears twice in one mapping (first on line {first}); "
                        "YAML would silently keep the last; allowed: each key once",
                        key_node.start_mark,
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


class _StrictLoader(_Strict, yaml.SafeLoader):
    pass


# libyaml's parser when PyYAML has it (several times faster; same resolver and constructor, so the same data).
# Only a file it refuses is read again by the pure-Python parser, whose messages (line, problem) the checks show.
_FAST_SAFE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _FastStrictLoader(_Strict, _FAST_SAFE):
    pass


def _parsed(text: str, fast, slow, parse=yaml.load):
    """`parse(text, Loader=fast)`; on any YAML error, `parse(text, Loader=slow)` (its error, in its words)."""
    if fast is not slow:
        try:
            return parse(text, Loader=fast)  # noqa: S506 - SafeLoader subclasses
        except yaml.YAMLError:
            pass
    return parse(text, Loader=slow)  # noqa: S506


def _where(path: Path, mark) -> str:
    return f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(path)


def load(path: str | Path) -> Any:
    """The data in a YAML (or JSON) file; YamlError naming the file and line if it is unreadable,
    malformed or gives a key twice."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise YamlError(f"{path}: cannot be read ({err.strerror})") from None
    except UnicodeDecodeError as err:
        raise YamlError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start}); allowed: YAML saved as UTF-8") from None
    try:
        return _parsed(text, _FastStrictLoader, _StrictLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        problem = err.problem or err.context or "not valid YAML"
        context = f" ({err.context})" if err.context and err.problem else ""
        if isinstance(err, yaml.constructor.ConstructorError) and "appears twice" in problem:
            raise YamlError(f"{_where(path, mark)}: {problem}") from None
        raise YamlError(f"{_where(path, mark)}: {problem}{context}; allowed: YAML, indented with spaces "
                        "(never tabs), each nested key indented deeper than its parent") from None
    except yaml.YAMLError as err:
        raise YamlError(f"{path}: not valid YAML: {err}") from None


def load_lenient(path: str | Path) -> Any:
    """The data as Snakemake reads it (a repeated key keeps its last value); YamlError if malformed."""
    try:
        return _parsed(Path(path).read_text(encoding="utf-8"), _FAST_SAFE, yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise YamlError(f"{path}: {err}") from None


def key_lines(path: str | Path) -> dict[tuple, int]:
    """Key path (tuple of keys and list indices) -> the line (1-based) of its key in the file (a list item's own
    line): `genrator:` with its keys below is named on its own line, not on its first key's."""
    try:
        root = _parsed(Path(path).read_text(encoding="utf-8"), _FAST_SAFE, yaml.SafeLoader, parse=yaml.compose)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    out: dict[tuple, int] = {}

    def walk(node, where: tuple, line: int | None = None) -> None:
        out[where] = line or node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    walk(value_node, where + (key_node.value,), key_node.start_mark.line + 1)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, where + (i,))

    if root is not None:
        walk(root, ())
    return out


# ------------------------------------------------------------------------------------ checking
def _is_integer(checker, instance) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_number(checker, instance) -> bool:
    return isinstance(instance, (int, float)) and not isinstance(instance, bool) and math.isfinite(instance)


StrictValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _is_integer, "number": _is_number}
    ),
)


def key_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def show(value: Any) -> str:
    """A value as the user would write it in YAML (NaN and infinity included)."""
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return repr(value)


def _bounds(schema: dict) -> str:
    parts = []
    for name, sym in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if name in schema:
            parts.append(f"{sym} {schema[name]:g}" if isinstance(schema[name], float) else f"{sym} {schema[name]}")
    return " and ".join(parts)


def _type_words(schema: dict) -> str:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    words = {
        "integer": "a whole number", "number": "a finite number", "string": "text", "boolean": "true or false",
        "array": "a list", "object": "a mapping", "null": "null",
    }
    text = " or ".join(words.get(k, str(k)) for k in kinds)
    bounds = _bounds(schema)
    return f"{text} {bounds}" if bounds and set(kinds) & {"integer", "number"} else text


def describe_allowed(error: jsonschema.ValidationError) -> str:
    schema, kind = error.schema, error.validator
    if kind == "pattern" and schema.get("description"):  # the key's own words first: a regex alone says little
        return f"{schema['description'].rstrip('.')}: text matching {schema['pattern']}"
    if kind == "not" and schema.get("description"):
        return schema["description"]
    if kind == "not":
        inner = schema["not"]
        if "enum" in inner:
            return f"anything but {inner['enum']}"
        if "pattern" in inner:
            return f"text that does not match {inner['pattern']}"
    if kind == "enum":
        return f"one of {schema['enum']}"
    alternatives = schema.get("anyOf") if kind == "anyOf" else None
    if alternatives and all("enum" in a or "type" in a for a in alternatives):  # e.g. a batch: auto or a number
        return " or ".join(" or ".join(show(v) for v in a["enum"]) if "enum" in a else _type_words(a)
                           for a in alternatives)
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return _type_words(schema) if "type" in schema else "a number " + _bounds(schema)
    if kind == "type":
        return _type_words(schema)
    if kind == "additionalProperties" and schema.get("additionalProperties") is False:
        return f"only the keys {sorted(schema.get('properties', {}))}"
    if kind == "required":
        return f"the keys {schema['required']}"
    if kind in ("minItems", "minProperties"):
        least = schema[kind]
        return "a non-empty value" if least == 1 else f"at least {least} {'items' if kind == 'minItems' else 'keys'}"
    if kind == "maxItems":
        return f"at most {schema['maxItems']} items"
    if kind in ("minLength",):
        return "non-empty text"
    if kind == "pattern":
        return f"text matching {schema['pattern']}"
    if kind == "multipleOf":
        return f"a multiple of {schema['multipleOf']}"
    if kind == "uniqueItems":
        return "no repeated values"
    return error.message


_NUMBER_TEXT = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


def number_text_hint(value: str, wants: str) -> str | None:
    """Why a number written in YAML became text, and how to write it (None if it is not number-like)."""
    text = value.strip()
    if not _NUMBER_TEXT.match(text):
        return None
    number = float(text)
    if wants == "integer" and number.is_integer():
        fix = str(int(number))
    else:
        # YAML 1.1 (PyYAML, Snakemake) reads a float only with a dot and a signed exponent: 1.0e-3, 3.9e+9
        mantissa, _, exponent = text.lower().partition("e")
        if exponent and exponent[0] not in "+-":
            exponent = "+" + exponent
        fix = (mantissa if "." in mantissa else mantissa + ".0") + (f"e{exponent}" if exponent else "")
    return f"{value!r} is text in YAML: write {fix}"


def _wanted_number_type(schema: dict) -> str | None:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "integer" in kinds:
        return "integer"
    return "number" if "number" in kinds else None


def error_messages(error: jsonschema.ValidationError, *, text_origin: str | None = None) -> list[tuple[tuple, str]]:
    """(key path, clear message) for one schema error. `text_origin`, if given, explains where a text
    value came from in place of the YAML hint (e.g. Snakemake's --config reads nested values as text)."""
    where = tuple(error.absolute_path)
    path = key_path(where)
    if error.validator == "additionalProperties" and error.schema.get("additionalProperties") is False:
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})), key=str)
        return [
            (where + (name,), f"{key_path(where + (name,))}: unknown key; allowed: {describe_allowed(error)}")
            for name in extra
        ]
    if "propertyNames" in error.schema_path:
        allowed = error.schema.get("description") or describe_allowed(error)
        return [(where + (error.instance,), f"{path}: key {error.instance!r} is not allowed; allowed: {allowed}")]
    if error.validator == "required":
        missing = [k for k in error.schema["required"] if k not in error.instance]
        return [(where, f"{path}: the key {k!r} is missing; allowed: a mapping with the keys {error.schema['required']}")
                for k in missing]
    value, allowed = error.instance, describe_allowed(error)
    if error.validator == "type":
        wants = _wanted_number_type(error.schema)
        if isinstance(value, float) and not math.isfinite(value) and wants:
            what = "NaN" if math.isnan(value) else "infinity"
            return [(where, f"{path} = {show(value)}: {what} is not a number a run can use; allowed: {allowed}")]
        if isinstance(value, float) and wants == "integer":
            fix = f"; write {int(value)}" if value.is_integer() and abs(value) < 1e18 else ""
            return [(where, f"{path} = {show(value)}: a decimal number where a whole number is expected{fix}; "
                            f"allowed: {allowed}")]
        if isinstance(value, str) and wants:
            hint = number_text_hint(value, wants)
            if hint and text_origin:
                return [(where, f"{path} = {value!r}: {text_origin}; allowed: {allowed}")]
            if hint:
                return [(where, f"{path} = {value!r}: {hint}; allowed: {allowed}")]
    return [(where, f"{path} = {show(value)}: not allowed; allowed: {allowed}")]


def schema_problems(data: Any, schema: dict, *, text_origin=None) -> list[tuple[tuple, str]]:
    """Every schema problem of `data` as (key path, one clear line), in key order.

    `text_origin(path_tuple) -> str | None` may explain why a value at that path is text."""
    validator = StrictValidator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    # A value of the wrong type gets one message (its type), not one per bound it also misses.
    mistyped = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
    out = []
    for error in errors:
        if error.validator != "type" and tuple(error.absolute_path) in mistyped:
            continue
        origin = text_origin(tuple(error.absolute_path)) if text_origin else None
        out.extend(error_messages(error, text_origin=origin))
    return out


def schema_errors(data: Any, schema: dict, *, text_origin=None) -> list[str]:
    return [message for _, message in schema_problems(data, schema, text_origin=text_origin)]


def load_schema(path: str | Path) -> dict:
    return load(path)


def nearest_line(lines: dict[tuple, int], where: tuple) -> int | None:
    """The line of `where`, or of its nearest ancestor that the file has."""
    for n in range(len(where), -1, -1):
        if where[:n] in lines:
            return lines[where[:n]]
    return None


_CHECKED: dict[tuple, Any] = {}  # (file, its bytes, the schema's bytes) -> data that passed, once per process


def load_checked(path: str | Path, schema_path: str | Path, what: str = "") -> Any:
    """Load a YAML file and validate it against its schema; YamlError listing every problem, each
    naming the file and the line of the value. The same bytes against the same schema are checked once
    per process (machines.yaml is asked for by the config check and by the workflow); each caller gets
    its own copy."""
    path = Path(path)
    try:
        key = (str(path.resolve()), path.read_bytes(), Path(schema_path).read_bytes())
    except OSError:
        key = None  # load() and load_schema() name the file that cannot be read
    if key in _CHECKED:
        return copy.deepcopy(_CHECKED[key])
    data = load(path)
    problems = schema_problems(data, load_schema(schema_path))
    if problems:
        lines = key_lines(path)
        listed = []
        for where, message in problems:
            line = nearest_line(lines, where)
            listed.append(f"{path}, line {line}: {message}" if line else f"{path}: {message}")
        head = f"{path}: invalid{(' ' + what) if what else ''} (nothing was run or written):"
        raise YamlError(head + "\n  " + "\n  ".join(listed))
    if key is not None:
        _CHECKED[key] = copy.deepcopy(data)
    return data
