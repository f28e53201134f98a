"""Config checks that name the key, the value and what is allowed, before any job runs.

`check_config` re-reads the config files Snakemake loaded (duplicate keys, file and line), refuses a
later file's empty mapping that Snakemake would merge away, validates against config/schema.yaml
(finite numbers, whole numbers, YAML's number-or-text surprises explained), checks phenotype and
pose against Anny's own tables (fourloops.anny_tables, no anny import) and the cross-key rules.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import copy
import json
import re
import string
from pathlib import Path
from typing import Any, Iterable, Mapping

from fourloops import anny_tables, yamlcheck
from fourloops.yamlcheck import key_path, show  # noqa: F401  (key_path: part of this module's API)

# Ladder names that the table uses for its own rows; a condition may not take them.
RESERVED_SOURCES = ("floor", "floor_gt", "render")
# A restyle instruction's bound, checked without a tokenizer: every token of a byte-level BPE (the Qwen2.5-VL
# tokenizers of both backends' text encoders) covers at least one byte, so 1024 UTF-8 bytes are at most 1024
# tokens, the longest max_sequence_length either pipeline takes (Qwen-Image-Edit's refuses more; OmniGen2's
# is 1024 as fourloops.generate passes it).
MAX_INSTRUCTION_BYTES = 1024


class ConfigError(ValueError):
    """A config value that cannot run. The message names the key path, the value and what is allowed."""


def load_schema(path: str | Path) -> dict:
    if Path(path).suffix == ".json":  # the merged schema rules/common.smk writes (YAML 1.1 reads 1e-06 as text)
        return json.loads(Path(path).read_text(encoding="utf-8"))
    return yamlcheck.load(path)


def schema_errors(config: dict, schema: dict, text_origin=None) -> list[str]:
    return yamlcheck.schema_errors(config, schema, text_origin=text_origin)


def loaded_configfiles(workflow) -> list[Path]:
    """The config files a Snakemake 9 workflow merged, in merge order: the Snakefile's `configfile:`
    directives, then every --configfile (Snakemake merges the latter over the former)."""
    command_line = [Path(f).absolute() for f in workflow.config_settings.configfiles]
    directives = [Path(f).absolute() for f in workflow.configfiles if Path(f).absolute() not in command_line]
    return directives + command_line


_ABSENT = object()


def _lookup(data: Any, where: tuple) -> Any:
    for part in where:
        if isinstance(data, Mapping) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return _ABSENT
    return data


def _get(data: Any, where: tuple) -> Any:
    value = _lookup(data, where)
    return None if value is _ABSENT else value


def _has(data: Any, where: tuple) -> bool:
    return _lookup(data, where) is not _ABSENT


def _empty_mappings(data: Any, where: tuple = ()) -> list[tuple]:
    if not isinstance(data, Mapping):
        return []
    if not data:
        return [where]
    return [p for key, value in data.items() for p in _empty_mappings(value, where + (key,))]


def _merge(config: dict, update: Mapping) -> None:
    from snakemake.utils import update_config  # the merge Snakemake itself applies

    update_config(config, update)


def configfile_problems(paths: Iterable[str | Path]) -> list[str]:
    """Why Snakemake would refuse a --configfile before the workflow is read, with the file, line and what is
    allowed (Snakemake's own words name neither file nor line); [] when each loads as a mapping of keys."""
    problems = []
    for path in paths:
        if Path(path).is_dir():
            problems.append(f"config file {path}: a directory; allowed: a YAML file of config keys")
            continue
        if not Path(path).exists():
            target = ("" if Path(path).suffix.lower() in (".yaml", ".yml", ".json") else
                      " (a target? --configfile takes every word after it: end it with -- before the targets)")
            problems.append(f"config file {path}: does not exist{target}; allowed: a YAML file of config keys")
            continue
        try:
            data = yamlcheck.load(path)
        except yamlcheck.YamlError as err:
            problems.append(str(err))
            continue
        if not isinstance(data, Mapping):
            held = "nothing" if data is None else type(data).__name__
            problems.append(f"{path}: holds {held}, not a mapping of config keys; allowed: keys such as azimuths:, "
                            "render:, conditions: at the top level")
    return problems


def profile_problems(folder: str | Path) -> list[str]:
    """A Snakemake profile's config.yaml, read before Snakemake reads it (`fourloops plan`): malformed YAML or a key
    given twice (Snakemake's profile parser keeps the last, silently) by file and line, and a key that is no
    Snakemake option, which Snakemake refuses as `unrecognized arguments: --frobnicate=1` under its whole usage,
    naming no file. The file is the one Snakemake reads (its get_profile_dir: a profile's newest config.vN+.yaml, its
    config.yaml or profile.yaml, or the file named). [] for a profile without one, or a YTE template (`__use_yte__`),
    which Snakemake renders."""
    import difflib

    from snakemake.cli import get_profile_dir

    found = get_profile_dir(str(folder))
    if found is None:
        return []
    path = found[1]
    try:
        data = yamlcheck.load(path)
    except yamlcheck.YamlError as err:
        return [str(err)]
    if not isinstance(data, Mapping) or "__use_yte__" in data:
        return []  # not a mapping: Snakemake's own words name the file
    from snakemake.cli import get_argument_parser

    # the options Snakemake's parser (its plugins' included) takes; argparse lists them only on its actions
    options = sorted({s[2:] for action in get_argument_parser()._actions for s in action.option_strings
                      if s.startswith("--")})
    lines = yamlcheck.key_lines(path)
    out = []
    for key in data:
        if str(key).removeprefix("--") in options:  # configargparse takes `keep-going` and `--keep-going`
            continue
        near = difflib.get_close_matches(str(key), options, n=3)
        at = f"{path}, line {lines[(key,)]}" if (key,) in lines else str(path)
        out.append(f"{at}: {key}: not a Snakemake option; allowed: "
                   + (f"one of {near}, or another " if near else "a ")
                   + "long option of `snakemake --help`, without its --")
    return out


def scheduling_problems(resource_settings, local_exec: bool) -> list[str]:
    """What no job could start under, on which Snakemake waits forever: under the local executor `--cores 0` (a
    profile's `cores: 0`), under a remote one (SLURM, RunPod) `--jobs 0`; refused before any job, naming the option,
    its profile key and the value. What the executor ignores is not judged: --jobs beside --cores under the local
    executor, --cores under a remote one (Snakemake lifts its cap there), and --local-cores, which the pinned
    Snakemake (9.27.1) reads nowhere."""
    attr, option, key, also = (("cores", "--cores", "cores", ", or all") if local_exec else
                               ("nodes", "--jobs", "jobs", ""))
    value = getattr(resource_settings, attr, None)
    if isinstance(value, int) and value < 1:
        return [f"{option} {value} (or a profile's `{key}: {value}`): no job could ever start, so the run would wait "
                f"forever; allowed: a whole number >= 1{also}"]
    return []


def overridden(configfiles: Iterable[str | Path], command_line: Mapping | None) -> list[str]:
    """Each value a --configfile sets that a --config (or a profile's `config:` list, which Snakemake passes as one)
    replaces with another: Snakemake applies the command line last, so `model_set: real` in a file run under the
    smoke profile plans the smoke set, silently. One line per value, naming the file, its line and both values."""
    leaves: list[tuple[tuple, Any]] = []

    def walk(data: Any, where: tuple) -> None:
        if isinstance(data, Mapping) and data:
            for key, value in data.items():
                walk(value, where + (key,))
        elif where:
            leaves.append((where, data))

    walk(dict(command_line or {}), ())
    out = []
    for path in configfiles:
        try:
            data = yamlcheck.load_lenient(path)
        except yamlcheck.YamlError:
            continue  # named by source_problems
        lines = None
        for where, value in leaves:
            if _has(data, where) and _get(data, where) != value:
                lines = yamlcheck.key_lines(path) if lines is None else lines
                at = f"{path}, line {lines[where]}" if where in lines else str(path)
                out.append(f"{at}: {key_path(where)} = {show(_get(data, where))} is replaced by the command line's "
                           f"{key_path(where)} = {show(value)} (a --config, or a profile's config: list, is applied "
                           "after every --configfile)")
    return out


def source_problems(configfiles: Iterable[str | Path], command_line: Mapping | None):
    """Problems of the config files themselves, and where each key path was last set.

    Returns (problems, origin) where origin(path) -> "FILE, line N" or "--config" or None.
    """
    problems: list[str] = []
    sources: list[tuple[str, Any, dict]] = []  # (label, data, key lines), in merge order
    for path in configfiles:
        try:
            data = yamlcheck.load(path)
        except yamlcheck.YamlError as err:
            problems.append(str(err))
            try:  # Snakemake read it (keeping the last of a repeated key): locate values as it did
                data = yamlcheck.load_lenient(path)
            except yamlcheck.YamlError:
                continue
        if data is not None and not isinstance(data, Mapping):
            problems.append(f"{path}: holds {type(data).__name__}, not a mapping of config keys; "
                            "allowed: keys such as azimuths:, render:, conditions: at the top level")
            continue
        sources.append((str(path), data or {}, yamlcheck.key_lines(path)))
    if command_line:
        sources.append(("--config", dict(command_line), {}))

    # A later source's `key: {}` is merged into the earlier mapping key by key, so it empties nothing.
    merged: dict = {}
    for label, data, lines in sources:
        for where in _empty_mappings(data):
            before = _get(merged, where)
            if where and isinstance(before, Mapping) and before:
                at = f"{label}, line {lines[where]}" if where in lines else label
                problems.append(
                    f"{at}: {key_path(where)} = {{}}: an empty mapping does not empty it (Snakemake merges each "
                    f"config over the earlier ones key by key, so it would still hold {sorted(before)}); allowed: "
                    f"the entries to keep, listed; remove unwanted ones from the file that defines them"
                )
        _merge(merged, copy.deepcopy(data))

    def origin(where: tuple) -> str | None:
        for label, data, lines in reversed(sources):
            if _has(data, where):
                line = yamlcheck.nearest_line(lines, where)
                return f"{label}, line {line}" if line else label
        return None

    return problems, origin


def table_errors(config: Mapping, tables: Mapping | None = None) -> list[tuple[tuple, str]]:
    """(key path, message) for phenotype keys and ranges and pose bones against Anny's own tables
    (fourloops.anny_tables)."""
    tables = tables or anny_tables.load()
    body = _get(config, ("render", "body"))
    if not isinstance(body, Mapping):
        return []
    messages = []
    version = f"anny {tables['anny_version']}"
    phenotype = body.get("phenotype")
    if isinstance(phenotype, Mapping):
        for key, value in phenotype.items():
            where = f"render.body.phenotype.{key}"
            if key not in tables["phenotype"]:
                messages.append((("render", "body", "phenotype", key),
                                 f"{where}: unknown phenotype key; allowed: one of {list(tables['phenotype'])} ({version})"))
                continue
            rng = tables["phenotype"][key]
            if yamlcheck._is_number(None, value) and not rng["min"] <= value <= rng["max"]:
                messages.append((("render", "body", "phenotype", key),
                    f"{where} = {show(value)}: not allowed; allowed: a number >= {rng['min']:g} and <= {rng['max']:g} "
                    f"({version} phenotype range, as fourloops.body renders it)"
                ))
    pose = body.get("pose")
    if isinstance(pose, Mapping):
        bones = tables["bones"]
        for bone in pose:
            if bone not in bones:
                near = [b for b in bones if str(bone).split(".")[0].lower().rstrip("0123456789") in b.lower()][:12]
                hint = f"; close names: {near}" if near else ""
                messages.append((("render", "body", "pose", bone),
                    f"render.body.pose.{bone}: unknown bone; allowed: one of Anny's {len(bones)} bones ({version}, "
                    f"listed in src/fourloops/anny_tables.json){hint}"
                ))
    return messages


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
        messages += template_errors(f"conditions.{name}.prompt", cond["prompt"], ("azimuth",), "{azimuth}")
    return messages + machine_errors(config) + restyle_errors(config) + lora_errors(config) + publish_errors(config)


def template_errors(key: str, text: str, names: tuple[str, ...], allowed: str) -> list[str]:
    """A text the jobs fill with `text.format(name=<a whole number>, ...)`: its braces balance, it names only
    `names` and at least the first of them, and it fills (a format spec such as {azimuth:q} fails only then)."""
    said = f"{key} = {text!r}"
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError as err:
        return [f"{said}: {err}; allowed: a text with {allowed}, a literal brace written twice ({{{{ or }}}})"]
    unknown = [f for f in fields if f not in names]
    if unknown:
        return [f"{said}: unknown placeholder(s) {unknown}; allowed: {allowed}"]
    if names[0] not in fields:
        return [f"{said}: the template must contain {{{names[0]}}}; allowed: a text containing {allowed}"]
    try:
        text.format(**{n: 0 for n in names})
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
        return [f"{said}: cannot be filled with a whole number ({err}); allowed: {allowed}, plain or with a number's "
                "format (e.g. {" + names[0] + ":03d})"]
    return []


def machine_errors(config: dict) -> list[str]:
    """`machine` names a machine or a SLURM cluster of config/machines.yaml (a bad machines file is reported by
    its own loader, with its line)."""
    from fourloops import machines

    try:
        table = machines.load()
    except machines.MachinesError:
        return []
    known = machines.targets(table)
    if config["machine"] in known:
        return []
    return [f"machine = {config['machine']!r}: not a machine of config/machines.yaml; allowed: one of {known}"]


def publish_errors(config: dict) -> list[str]:
    """publish.artifacts are workflow outputs: paths, and globs bounded by a literal folder, under results/
    (never the publication itself). A glob such as `**` would expand to the repository's own files."""
    import glob
    import os

    from fourloops.gate.precision import DEFAULT_DENY, name_tokens

    messages = []
    publish = config.get("publish") or {}
    deny = [t.lower() for t in publish.get("deny_name_patterns", DEFAULT_DENY)]
    for i, entry in enumerate(publish.get("artifacts") or []):
        path = os.path.normpath(entry["path"])
        top = path.split(os.sep, 1)[0]
        where = f"publish.artifacts[{i}].path = {entry['path']!r}"
        if top != "results" or path == "results":
            if glob.has_magic(top):
                why = "a glob whose first folder is a pattern reaches the repository's own files"
            elif top in ("config", "src", "rules", "scripts", "tests", "envs", "bench", "Snakefile", "README.md"):
                why = (f"{path} is a source file of the repository, not a workflow output: no rule makes it and no "
                       "--forcerun can; the manifest names the commit it is part of")
            else:
                why = "not a workflow output"
            messages.append(f"{where}: {why}; allowed: a file under results/ that a rule makes, or a glob under a "
                            "literal results/ folder (e.g. results/ladder.*, results/fit/*.json)")
        elif path.split(os.sep)[1:2] == ["published"]:
            messages.append(f"{where}: the publication itself; allowed: a workflow output under results/ "
                            "(not results/published/)")
        elif entry.get("kind") == "corpus" and (hits := name_tokens(entry["path"], deny)):
            messages.append(f"{where}: a corpus name carries {', '.join(hits)}, which the gate refuses (rule 1); "
                            f"allowed: a name without the tokens of publish.deny_name_patterns {list(deny)} (a "
                            "quantised precision is said in the provenance, and a quantised corpus is not published)")
    return messages


def restyle_errors(config: dict) -> list[str]:
    """The restyle, drift and grades slices (config/schema.d): what their schemas cannot say."""
    from fourloops.coco import COCO17_NAMES, KNOWN_JOINTS

    messages = []
    azimuths = list(config["azimuths"])
    restyle = config.get("restyle") or {}
    for name, instruction in (restyle.get("styles") or {}).items():
        if not instruction.strip():
            messages.append(f"restyle.styles.{name} = {instruction!r}: an empty instruction; allowed: the text the "
                            "generator is asked to restyle the render with")
        elif (size := len(instruction.encode("utf-8"))) > MAX_INSTRUCTION_BYTES:
            messages.append(f"restyle.styles.{name} = {show(instruction[:40])}... ({size} bytes): longer than the text "
                            f"encoder can be sure to take; allowed: at most {MAX_INSTRUCTION_BYTES} bytes (a byte-level "
                            f"tokenizer makes at most one token a byte; both backends' encoders take {MAX_INSTRUCTION_BYTES} tokens)")
    for i, az in enumerate(restyle.get("azimuths") or []):
        if az not in azimuths:
            messages.append(f"restyle.azimuths[{i}] = {az}: no render at that azimuth; allowed: one of azimuths {azimuths}")
    for region, joints in ((config.get("drift") or {}).get("regions") or {}).items():
        for i, joint in enumerate(joints):
            if joint not in KNOWN_JOINTS:
                messages.append(f"drift.regions.{region}[{i}] = {joint!r}: unknown joint; allowed: a COCO-17 name "
                                f"({', '.join(COCO17_NAMES)}) or a COCO-WholeBody foot, face or hand name "
                                "(fourloops.coco.KNOWN_JOINTS)")
    grades = config.get("grades") or {}
    if grades.get("precision") == "nf4" and grades.get("device") == "cpu":
        messages.append("grades.precision = 'nf4': not allowed with grades.device = 'cpu'; allowed: fp32 or bf16 on "
                        "cpu (nf4 needs bitsandbytes on CUDA)")
    batch = grades.get("batch", 1)
    if grades.get("decoding") == "sample" and isinstance(batch, int) and not isinstance(batch, bool) and batch > 1:
        messages.append(f"grades.batch = {batch}: not allowed with grades.decoding = 'sample' (each sampled answer "
                        "is seeded by its own scorer call); allowed: 1 or auto (one view a call under sample "
                        "decoding), or grades.decoding = 'greedy'")
    scorer = grades.get("scorer")
    if scorer is not None and scorer == config["generator"]["model"]:
        messages.append(f"grades.scorer = {scorer!r} is generator.model = {config['generator']['model']!r}: a "
                        "generator scoring its own output is not a measurement; allowed: another model")
    return messages


def lora_errors(config: dict) -> list[str]:
    """The camera LoRA slice (config/schema.d/lora.yaml): what its schema cannot say. The model-level
    checks (target modules, the resolution the backend takes) are fourloops.lora_config.config_problems."""
    lora = config.get("lora")
    if not lora:
        return []
    messages = []
    rec = lora["records"]
    for where, count, azimuths in (("lora.records", rec["count"], rec["azimuths"]),
                                   ("lora.smoke", lora["smoke"]["count"], lora["smoke"]["azimuths"])):
        pairs = len(azimuths) * (len(azimuths) - 1)
        if count > pairs:
            messages.append(
                f"{where}.count = {count}: more records than azimuth pairs; allowed: at most {pairs} "
                f"({len(azimuths)} azimuths in {where}.azimuths give {len(azimuths)} x {len(azimuths) - 1} ordered "
                "pairs of distinct views, each used once): lower the count or add azimuths"
            )
    messages += template_errors("lora.records.instruction", rec["instruction"], ("azimuth", "source_azimuth"),
                                "{azimuth} (the target view's) and {source_azimuth}")
    return messages


def _plain_mappings(data: dict) -> None:
    """Snakemake's validate reads a JSON schema into OrderedDicts and fills defaults from them: make every mapping a
    plain dict again, in place and in order (params compare by repr; YAML's safe_dump refuses OrderedDict)."""
    for key, value in list(data.items()):
        if isinstance(value, Mapping):
            value = dict(value)
            _plain_mappings(value)
            data[key] = value
        elif isinstance(value, list):
            data[key] = [_plain_list_item(v) for v in value]


def _plain_list_item(value):
    if isinstance(value, Mapping):
        value = dict(value)
        _plain_mappings(value)
    return value


def check_config(
    config: dict,
    schema_path: str | Path,
    backends: Iterable[str],
    smoke_backends: Iterable[str],
    fill_defaults,
    *,
    configfiles: Iterable[str | Path] = (),
    command_line: Mapping | None = None,
) -> dict:
    """Validate `config` in place: its source files, the schema (clear messages), Anny's tables, then
    defaults, then cross-key checks.

    `fill_defaults(config, schema_path)` fills schema defaults (snakemake.utils.validate in the workflow).
    `configfiles`: the files Snakemake merged, in merge order (`loaded_configfiles(workflow)`);
    `command_line`: the --config values (`workflow.config_settings.config`).
    Raises ConfigError listing every problem found; changes nothing on disk.
    """
    schema = load_schema(schema_path)
    problems, origin = source_problems(configfiles, command_line)
    cli = dict(command_line or {})

    def text_origin(where: tuple) -> str | None:
        # Snakemake parses a --config value as a number only at the top level; inside a mapping it is text.
        if len(where) > 1 and _has(cli, where):
            return (f"Snakemake reads the values inside a --config mapping as text; set {key_path(where)} "
                    "in a --configfile instead")
        return None

    for where, message in yamlcheck.schema_problems(config, schema, text_origin=text_origin) + table_errors(config):
        at = origin(where)
        problems.append(f"{at}: {message}" if at else message)
    if not problems:
        fill_defaults(config, str(schema_path))
        _plain_mappings(config)
        problems = [_located(m, origin) for m in semantic_errors(config, list(backends), list(smoke_backends))]
    if problems:
        raise ConfigError(
            "invalid config (nothing was run or written):\n  " + "\n  ".join(problems)
        )
    return config


_KEY_FIRST = re.compile(r"([A-Za-z_]\w*(?:\.[\w-]+|\[\d+\])*) = ")


def _located(message: str, origin) -> str:
    """A cross-key message (`key.path[i] = value: ...`) with the file and line its first key was set at, as the
    schema's messages have (a value left at its default has none)."""
    m = _KEY_FIRST.match(message)
    if m is None:
        return message
    where = tuple(int(part[1:-1]) if part.startswith("[") else part
                  for part in re.findall(r"\[\d+\]|[^.\[\]]+", m.group(1)))
    at = origin(where)
    return f"{at}: {message}" if at else message


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


MODELS_SCHEMA = Path(__file__).resolve().parents[2] / "config" / "models.schema.yaml"


def load_model_facts(path: str | Path, schema_path: str | Path = MODELS_SCHEMA) -> dict:
    """config/models.yaml, validated by config/models.schema.yaml and the cross-references the schema
    cannot express; ConfigError naming the file, line, key, value and what is allowed."""
    path = Path(path)
    try:
        facts = yamlcheck.load_checked(path, schema_path, what="models file")
    except yamlcheck.YamlError as err:
        raise ConfigError(str(err)) from None
    problems = []
    dtypes = sorted(facts["bytes_per_param"])
    for table in ("process_overhead", "process_overhead_expandable"):
        for kind, over in (facts.get(table) or {}).items():
            for key in (over or {}).get("activations_reserve_by_references") or {}:
                if isinstance(key, bool) or not isinstance(key, int) or key < 1:
                    problems.append(f"{table}.{kind}.activations_reserve_by_references: key {key!r} is not allowed; "
                                    "allowed: whole numbers >= 1 (reference counts)")
    for name, model in facts["models"].items():
        fmt = model.get("nf4_format")
        if fmt is not None and fmt not in facts["bytes_per_param"]:
            problems.append(f"models.{name}.nf4_format = {fmt!r}: not in bytes_per_param; allowed: one of {dtypes}")
        components = model.get("components") or {}
        for i, row in enumerate(model.get("measured") or []):
            for part in row.get("resident") or []:
                if part not in components:
                    problems.append(f"models.{name}.measured[{i}].resident: {part!r} is not a component of {name}; "
                                    f"allowed: one of {sorted(components)}")
        tables = [(f"activations_gib.{mode}", t) for mode, t in (model.get("activations_gib") or {}).items()]
        tables.append(("seconds.per_view_by_references", (model.get("seconds") or {}).get("per_view_by_references") or {}))
        tables.append(("seconds.per_lora_step_by_resolution",
                       (model.get("seconds") or {}).get("per_lora_step_by_resolution") or {}))
        for where, table in tables:
            for key in table:
                if isinstance(key, bool) or not isinstance(key, int) or key < 1:
                    problems.append(f"models.{name}.{where}: key {key!r} is not allowed; allowed: whole numbers >= 1 "
                                    "(pixels, or reference counts)")
    if problems:
        raise ConfigError(f"{path}: invalid models file (nothing was run or written):\n  " + "\n  ".join(problems))
    return facts

