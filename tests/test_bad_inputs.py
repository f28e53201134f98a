"""Bad inputs are refused before any job, naming the file and line, the key, the value and what is
allowed; nothing is written. Most cases at the library level; a handful through the CLI."""

from __future__ import annotations

import copy
import functools
import math
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_snakemake
from fourloops import anny_tables, machines, yamlcheck
from fourloops.backends import BACKENDS, SMOKE_BACKENDS
from fourloops.config import ConfigError, check_config, load_model_facts

SCHEMA = REPO / "config" / "schema.yaml"
CONFIG = REPO / "config" / "config.yaml"


@functools.cache
def whole_schema() -> Path:
    """The schema the workflow checks with: config/schema.yaml and each stage's slice (config/schema.d)."""
    import atexit
    import json
    import shutil
    import tempfile

    from fourloops.config import schema_with_slices

    directory = tempfile.mkdtemp(prefix="fourloops-test-schema-")
    atexit.register(shutil.rmtree, directory, True)
    path = Path(directory) / "schema.json"
    path.write_text(json.dumps(schema_with_slices(SCHEMA, REPO / "config" / "schema.d")))
    return path


def fill_defaults(config, schema_path):
    from snakemake.utils import validate

    validate(config, schema_path)


def as_snakemake_loads(extra: Path | None, command_line: dict | None) -> dict:
    """The config dict Snakemake builds: config.yaml, then the --configfile, then --config, merged."""
    from snakemake.utils import update_config

    config = yaml.safe_load(CONFIG.read_text())
    data = yaml.safe_load(extra.read_text()) if extra is not None else None
    if isinstance(data, dict):  # Snakemake refuses any other file itself
        update_config(config, data)
    if command_line:
        update_config(config, copy.deepcopy(command_line))
    return config


def refusal(tmp_path: Path, extra_yaml: str | None, command_line: dict | None = None) -> str:
    extra = None
    files = [CONFIG]
    if extra_yaml is not None:
        extra = tmp_path / "extra.yaml"
        extra.write_text(extra_yaml)
        files.append(extra)
    try:
        config = as_snakemake_loads(extra, command_line)
    except yaml.YAMLError:  # Snakemake itself refuses it (before the workflow): check our reading
        config = yaml.safe_load(CONFIG.read_text())
    with pytest.raises(ConfigError) as err:
        check_config(config, whole_schema(), BACKENDS, SMOKE_BACKENDS, fill_defaults, configfiles=files,
                     command_line=command_line)
    return str(err.value)


# (extra --configfile text, what the message must say)
CONFIG_CASES = [
    # NaN and infinity, by name, wherever a number is expected
    ("render:\n  camera:\n    elevation_deg: .nan\n", "render.camera.elevation_deg = .nan: NaN is not a number"),
    ("render:\n  camera:\n    focal_px: .inf\n", "render.camera.focal_px = .inf: infinity is not a number"),
    ("render:\n  camera:\n    focal_px: -.inf\n", "render.camera.focal_px = -.inf: infinity"),
    ("render:\n  camera:\n    distance_m: .NaN\n", "render.camera.distance_m = .nan: NaN"),
    ("fit:\n  min_keypoint_score: .nan\n", "fit.min_keypoint_score = .nan: NaN"),
    ("fit:\n  grid_step_deg: .inf\n", "fit.grid_step_deg = .inf: infinity"),
    ("generator:\n  guidance: .nan\n", "generator.guidance = .nan: NaN"),
    ("generator:\n  guidance: .inf\n", "generator.guidance = .inf: infinity"),
    ("render:\n  body:\n    phenotype: {age: .nan}\n", "render.body.phenotype.age = .nan: NaN"),
    ("render:\n  body:\n    pose: {neck01: [0, .nan, 0]}\n", "render.body.pose.neck01[1] = .nan: NaN"),
    ("azimuths: [0, .nan]\n", "azimuths[1] = .nan: NaN"),
    ("render:\n  background: [255, .inf, 255]\n", "render.background[1] = .inf: infinity"),
    # absurd sizes: every number has a finite bound
    ("smoke:\n  generator_size: 1000000\n", "smoke.generator_size = 1000000: not allowed; allowed: a whole number >= 32 and <= 512"),
    ("smoke:\n  generator_steps: 100000000\n", "smoke.generator_steps = 100000000: not allowed; allowed: a whole number >= 1 and <= 50"),
    ("smoke:\n  keypoints_resolution: 960000\n", "smoke.keypoints_resolution = 960000"),
    ("generator:\n  guidance: 1.0e+6\n", "generator.guidance = 1000000.0: not allowed; allowed: a finite number >= 0 and <= 100"),
    ("render:\n  camera:\n    focal_px: 1.0e+9\n", "render.camera.focal_px = 1000000000.0"),
    ("render:\n  body:\n    pose: {neck01: [0, 0, 1000]}\n", "render.body.pose.neck01[2] = 1000"),
    ("generator:\n  steps: 0\n", "generator.steps = 0"),
    ("fit:\n  min_keypoint_score: 2\n", "fit.min_keypoint_score = 2"),
    ("render:\n  camera:\n    elevation_deg: 90\n", "render.camera.elevation_deg = 90"),
    # whole numbers are whole
    ("generator:\n  steps: 28.5\n", "generator.steps = 28.5: a decimal number where a whole number is expected"),
    ("generator:\n  steps: 28.0\n", "generator.steps = 28.0: a decimal number where a whole number is expected; write 28"),
    ("smoke:\n  generator_size: 1.0e+6\n", "smoke.generator_size = 1000000.0: a decimal number"),
    ("azimuths: [0, 45.5]\n", "azimuths[1] = 45.5: a decimal number"),
    ("render:\n  image_size: true\n", "render.image_size = true: not allowed; allowed: a whole number"),
    # seeds within what torch takes, the per-view seed (seed + azimuth) included
    ("seed: 1.0e+23\n", "seed = 1e+23: a decimal number where a whole number is expected"),
    ("seed: 100000000000000000000000\n", "seed = 100000000000000000000000: not allowed; allowed: a whole number >= 0 and <= 18446744073709551256"),
    ("seed: 18446744073709551257\n", "seed = 18446744073709551257: not allowed"),
    ("seed: -1\n", "seed = -1: not allowed"),
    ("smoke:\n  seed: 18446744073709551616\n", "smoke.seed = 18446744073709551616: not allowed"),
    # YAML's number-or-text surprises, explained
    ("fit:\n  min_keypoint_score: 1e-3\n", "fit.min_keypoint_score = '1e-3': '1e-3' is text in YAML: write 1.0e-3"),
    ("render:\n  camera:\n    distance_m: 3e0\n", "'3e0' is text in YAML: write 3.0e+0"),
    ("render:\n  camera:\n    focal_px: 6.5e2\n", "'6.5e2' is text in YAML: write 6.5e+2"),
    ("render:\n  image_size: 1e3\n", "render.image_size = '1e3': '1e3' is text in YAML: write 1000"),
    ("render:\n  image_size: '512'\n", "render.image_size = '512': '512' is text in YAML: write 512"),
    ("render:\n  image_size: abc\n", "render.image_size = 'abc': not allowed; allowed: a whole number >= 64 and <= 4096"),
    ("render:\n  camera:\n    elevation_deg: ten\n", "render.camera.elevation_deg = 'ten': not allowed; allowed: a finite number"),
    # duplicate keys, by file and line
    ("seed: 1\nseed: 2\n", "extra.yaml, line 2, column 1: key 'seed' appears twice in one mapping (first on line 1)"),
    ("render:\n  image_size: 512\n  image_size: 600\n", "extra.yaml, line 3, column 3: key 'image_size' appears twice"),
    ("conditions:\n  A: {references: [0], prompt: '{azimuth}'}\n  A: {references: [90], prompt: '{azimuth}'}\n",
     "line 3, column 3: key 'A' appears twice"),
    ("render: {camera: {focal_px: 600, focal_px: 700}}\n", "key 'focal_px' appears twice"),
    # a later file's empty mapping is merged away, not applied
    ("conditions: {}\n", "extra.yaml, line 1: conditions = {}: an empty mapping does not empty it"),
    ("render:\n  camera: {}\n", "extra.yaml, line 2: render.camera = {}: an empty mapping does not empty it"),
    ("publish:\n  artifacts: []\n", "publish.artifacts = []: not allowed; allowed: a non-empty value"),
    # Anny's own tables
    ("render:\n  body:\n    phenotype: {wingspan: 0.5}\n", "render.body.phenotype.wingspan: unknown phenotype key; allowed: one of ['gender', 'age'"),
    ("render:\n  body:\n    phenotype: {age: 1.5}\n", "render.body.phenotype.age = 1.5: not allowed; allowed: a number >= 0 and <= 1"),
    ("render:\n  body:\n    phenotype: {height: -0.1}\n", "render.body.phenotype.height = -0.1: not allowed"),
    ("render:\n  body:\n    phenotype: {gender: male}\n", "render.body.phenotype.gender = 'male': not allowed; allowed: a finite number"),
    ("render:\n  body:\n    pose: {upperarm01.X: [0, 0, 0]}\n", "render.body.pose.upperarm01.X: unknown bone; allowed: one of Anny's 104 bones"),
    ("render:\n  body:\n    pose: {tail: [0, 0, 0]}\n", "render.body.pose.tail: unknown bone"),
    ("render:\n  body:\n    pose: {neck01: [0, 0]}\n", "render.body.pose.neck01 = [0, 0]: not allowed; allowed: at least 3 items"),
    ("render:\n  body:\n    pose: {neck01: [a, b, c]}\n", "render.body.pose.neck01[0] = 'a'"),
    ("render:\n  body:\n    phenotype: [0.5]\n", "render.body.phenotype = [0.5]: not allowed; allowed: a mapping"),
    # keys, types, enums, lists
    ("sede: 1\n", "sede: unknown key"),
    ("seed: 1\ngenrator:\n  steps: 10\n", "extra.yaml, line 2: genrator: unknown key"),  # the key's line, not its value's
    ("render:\n  colour: red\n", "render.colour: unknown key"),
    ("conditions: ~\n", "conditions = null: not allowed; allowed: a mapping"),
    ("azimuths: []\n", "azimuths = []: not allowed; allowed: a non-empty value"),
    ("ladder:\n  azimuths: [360]\n", "ladder.azimuths[0] = 360"),
    ("conditions:\n  B: {references: [0, 0]}\n", "conditions.B.references = [0, 0]: not allowed; allowed: no repeated values"),
    ("render:\n  background: [256, 0, 0]\n", "render.background[0] = 256"),
    ("render:\n  background: [0, 0]\n", "render.background = [0, 0]"),
    ("generator:\n  size: 500\n", "generator.size = 500: not allowed; allowed: a multiple of 16"),
    ("keypoints:\n  resolution: 100\n", "keypoints.resolution = 100"),
    ("keypoints:\n  num_windows: 3\n", "keypoints.num_windows = 3: not allowed; allowed: one of [1, 2]"),
    ("generator:\n  device: gpu\n", "generator.device = 'gpu'"),
    ("model_set: tiny\n", "model_set = 'tiny': not allowed; allowed: one of ['real', 'smoke', 'sizing']"),
    ("machine: laptop\n", "machine = 'laptop'"),
    ("generator:\n  backend: dalle\n", "generator.backend = 'dalle'"),
    ("conditions:\n  1A: {references: [0], prompt: '{azimuth}'}\n", "key '1A' is not allowed"),
    ("conditions:\n  floor: {references: [0], prompt: '{azimuth}'}\n", "key 'floor' is not allowed; allowed: a name "
     "of letters, digits and underscores that starts with a letter, other than floor, floor_gt and render"),
    ("conditions:\n  E: {references: [0]}\n", "conditions.E: the key 'prompt' is missing"),
    ("keypoints:\n  weights: ''\n", "keypoints.weights = ''"),
    ("publish:\n  artifacts: [{path: /etc/passwd, kind: corpus}]\n", "publish.artifacts[0].path = '/etc/passwd': not "
     "allowed; allowed: Path or glob pattern relative to the working directory (no leading /, no ..)"),
    ("hef:\n  model: rfdetr-int8\n", "hef.model = 'rfdetr-int8': not allowed; allowed: The HEF's name"),
    ("publish:\n  artifacts: [{path: '**', kind: corpus}]\n", "publish.artifacts[0].path = '**': a glob whose first "
     "folder is a pattern reaches the repository's own files; allowed: a file under results/ that a rule makes"),
    ("publish:\n  artifacts: [{path: config/machines.yaml, kind: report}]\n", "publish.artifacts[0].path = "
     "'config/machines.yaml': config/machines.yaml is a source file of the repository, not a workflow output: no rule "
     "makes it and no --forcerun can"),
    ("publish:\n  artifacts: [{path: ladder.csv, kind: corpus}]\n", "'ladder.csv': not a workflow output"),
    ("publish:\n  artifacts: [{path: results/published/ladder.csv, kind: corpus}]\n", "the publication itself"),
    ("publish:\n  artifacts: [{path: results/Ladder-NF4.csv, kind: corpus}]\n", "publish.artifacts[0].path = "
     "'results/Ladder-NF4.csv': a corpus name carries nf4, which the gate refuses (rule 1)"),
    # cross-key checks (after defaults)
    ("generator:\n  precision: nf4\n  device: cpu\n", "extra.yaml, line 2: generator.precision = 'nf4': not allowed with generator.device = 'cpu'"),
    ("conditions:\n  B: {references: [0, 91]}\n", "extra.yaml, line 2: conditions.B.references[1] = 91"),
    ("conditions:\n  B: {prompt: 'turn around'}\n", "the template must contain {azimuth}"),
    ("conditions:\n  B: {prompt: 'turn to {angle}'}\n", "unknown placeholder(s) ['angle']"),
    ("conditions:\n  B: {prompt: 'orbit to {azimuth} degrees }'}\n", "conditions.B.prompt = 'orbit to {azimuth} "
     "degrees }': Single '}' encountered in format string; allowed: a text with {azimuth}, a literal brace written "
     "twice ({{ or }})"),
    ("conditions:\n  B: {prompt: 'orbit to {azimuth:q}'}\n", "conditions.B.prompt = 'orbit to {azimuth:q}': cannot be "
     "filled with a whole number (Unknown format code 'q'"),
    ("lora:\n  records:\n    instruction: 'orbit to {azimuth degrees'\n", "extra.yaml, line 3: lora.records.instruction = 'orbit to "
     "{azimuth degrees': expected '}' before end of string"),
    ("grades:\n  precision: nf4\n  device: cpu\n", "extra.yaml, line 2: grades.precision = 'nf4': not allowed with grades.device = 'cpu'"),
    ("grades:\n  batch: 0\n", "extra.yaml, line 2: grades.batch = 0: not allowed; allowed: 'auto' or a whole number >= 1 "
     "and <= 64"),
    ("grades:\n  batch: many\n", "grades.batch = 'many': not allowed; allowed: 'auto' or a whole number >= 1"),
    ("grades:\n  batch: 4\n  decoding: sample\n", "extra.yaml, line 2: grades.batch = 4: not allowed with "
     "grades.decoding = 'sample' (each sampled answer is seeded by its own scorer call); allowed: 1 or auto"),
    # (these seven were tests/test_workflow.py's, each through its own Snakemake; the CLI's wiring of the same
    # check is test_cli_refuses_every_problem_*, below)
    ("azimuths: [0, 45, 400]\n", "azimuths[2] = 400: not allowed; allowed: a whole number >= 0 and < 360"),
    ("ladder:\n  azimuths: [-5]\n", "ladder.azimuths[0] = -5: not allowed"),
    ("conditions:\n  A: {references: [], prompt: 'x {azimuth}'}\n", "conditions.A.references = []: not allowed"),
    ("conditions:\n  E: {references: [0, 90, 180, 270], prompt: 'x {azimuth}'}\n",  # the walls measure 1-3 references
     "conditions.E.references = [0, 90, 180, 270]: not allowed; allowed: at most 3 items"),
    ("conditions:\n  A: {references: [0, 100], prompt: 'x {azimuth}'}\n",
     "conditions.A.references[1] = 100: no render at that azimuth"),
    ("conditions:\n  D: {}\n", "conditions.D = {}: an empty mapping does not empty it"),
    ("conditions:\n  A: {references: [0], prompt: 'no placeholder'}\n",
     "conditions.A.prompt = 'no placeholder': the template must contain {azimuth}"),
    # the file itself
    ("- 1\n- 2\n", "extra.yaml: holds list, not a mapping of config keys"),
    ("render:\n  camera: [1\n", "extra.yaml, line 3, column 1: expected ',' or ']'"),
    ("render:\n\timage_size: 512\n", "extra.yaml, line 2, column 1: found character '\\t' that cannot start any token"),
    ("render:\n  image_size: 512\n camera: {}\n", "extra.yaml, line 3, column 2"),
]


@pytest.mark.parametrize("extra,expect", CONFIG_CASES, ids=[f"config-{i}" for i in range(len(CONFIG_CASES))])
def test_bad_configfile_is_refused(tmp_path, extra, expect):
    msg = refusal(tmp_path, extra)
    assert expect in msg, msg
    assert msg.startswith("invalid config (nothing was run or written):")
    assert "allowed" in msg or "must" in msg


@pytest.mark.parametrize(
    "command_line,expect",
    [
        ({"render": {"image_size": "600"}}, "--config: render.image_size = '600': Snakemake reads the values inside "
                                            "a --config mapping as text; set render.image_size in a --configfile"),
        ({"seed": 1e23}, "--config: seed = 1e+23: a decimal number where a whole number is expected"),
        ({"seed": "abc"}, "--config: seed = 'abc': not allowed; allowed: a whole number"),
        ({"conditions": {}}, "--config: conditions = {}: an empty mapping does not empty it"),
        ({"smoke": {"generator_size": "1000000"}}, "--config: smoke.generator_size = '1000000'"),
        ({"fit": {"min_keypoint_score": ".nan"}}, "--config: fit.min_keypoint_score = '.nan': not allowed"),
    ],
)
def test_bad_command_line_config_is_refused(tmp_path, command_line, expect):
    msg = refusal(tmp_path, None, command_line)
    assert expect in msg, msg


def test_a_refusal_lists_every_problem_with_its_line(tmp_path):
    msg = refusal(tmp_path, "render:\n  camera:\n    elevation_deg: .nan\n    focal_px: .inf\nseed: -1\n")
    assert "extra.yaml, line 3: render.camera.elevation_deg = .nan" in msg
    assert "extra.yaml, line 4: render.camera.focal_px = .inf" in msg
    assert "extra.yaml, line 5: seed = -1" in msg


def test_a_value_from_config_yaml_is_located_there(tmp_path):
    # the second file changes nothing at that key, so the value's line is config.yaml's
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg["render"]["image_size"] = 1
    with pytest.raises(ConfigError) as err:
        check_config(cfg, SCHEMA, BACKENDS, SMOKE_BACKENDS, fill_defaults, configfiles=[CONFIG])
    line = next(i for i, text in enumerate(CONFIG.read_text().splitlines(), 1) if "image_size:" in text)
    assert f"{CONFIG}, line {line}: render.image_size = 1: not allowed" in str(err.value)


def test_the_largest_seed_with_the_largest_view_azimuth_is_one_torch_takes(tmp_path):
    import torch

    schema = yamlcheck.load(SCHEMA)
    top = schema["properties"]["seed"]["maximum"]
    torch.Generator().manual_seed(top + 359)  # the per-view seed of the largest allowed azimuth
    with pytest.raises((RuntimeError, ValueError, OverflowError)):
        torch.Generator().manual_seed(top + 360)
    extra = tmp_path / "extra.yaml"
    extra.write_text(f"seed: {top}\nazimuths: [0, 359]\nladder:\n  azimuths: [0, 359]\n"
                     "conditions:\n  A: {references: [0]}\n  B: {references: [0]}\n  C: {references: [0]}\n")
    config = as_snakemake_loads(extra, None)
    check_config(config, SCHEMA, BACKENDS, SMOKE_BACKENDS, fill_defaults, configfiles=[CONFIG, extra])


def test_valid_overrides_still_pass(tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text("seed: 0\nfit:\n  min_keypoint_score: 1.0e-3\nrender:\n  body:\n"
                     "    phenotype: {age: 0.2, height: 1}\n    pose: {neck01: [0, 0, -15.5], head: [5, 0, 0]}\n")
    config = as_snakemake_loads(extra, {"model_set": "smoke", "seed": 5})
    check_config(config, SCHEMA, BACKENDS, SMOKE_BACKENDS, fill_defaults, configfiles=[CONFIG, extra],
                 command_line={"model_set": "smoke", "seed": 5})
    assert config["fit"]["min_keypoint_score"] == 0.001 and config["seed"] == 5


# ----------------------------------------------------------------------------- machines.yaml
MACHINES_TEXT = (REPO / "config" / "machines.yaml").read_text()


def _machines_dict_case(mutate):
    def make():
        data = yaml.safe_load(MACHINES_TEXT)
        mutate(data)
        return yaml.safe_dump(data, sort_keys=False)
    return make


def _text_case(old, new):
    def make():
        assert old in MACHINES_TEXT
        return MACHINES_TEXT.replace(old, new, 1)
    return make


MACHINES_CASES = [
    (_machines_dict_case(lambda d: d.pop("desk")), "cluster.submit_host = 'desk': not a machine of this file; allowed: one of ['pod', 'h200', 'h200_pair']"),
    (_machines_dict_case(lambda d: d.pop("pod")), "the key 'pod' is missing"),
    (_text_case("vram_gib: 24.0", "vram_gib: lots"), "line 12: desk.gpu.vram_gib = 'lots': not allowed; allowed: a finite number > 0"),
    (_text_case("vram_gib: 24.0", "vram_gib: 24e0"), "desk.gpu.vram_gib = '24e0': '24e0' is text in YAML: write 24.0e+0"),
    (_text_case("busy_card_limit_gib: 2.0  # RFD", "busy_card_limit_gib: -1  # RFD"), "desk.busy_card_limit_gib = -1: not allowed; allowed: a finite number > 0"),
    (_text_case("busy_card_limit_gib: 2.0  # RFD", "busy_card_limit_gib: 0  # RFD"), "desk.busy_card_limit_gib = 0: not allowed"),
    (_text_case("busy_card_limit_gib: 2.0  # RFD", "busy_card_limit_gib: .nan  # RFD"), "desk.busy_card_limit_gib = .nan: NaN"),
    (_machines_dict_case(lambda d: d["pod"].update(gpu_classes=[])), "pod.gpu_classes = []: not allowed; allowed: a non-empty value"),
    (_machines_dict_case(lambda d: d["pod"].pop("gpu_classes")), "pod: the key 'gpu_classes' is missing"),
    (_machines_dict_case(lambda d: d["pod"]["gpu_classes"][0].pop("vram_gb")), "pod.gpu_classes[0]: the key 'vram_gb' is missing"),
    (_machines_dict_case(lambda d: d["desk"].update(ram_gib=math.inf)), "desk.ram_gib = .inf: infinity"),
    (_machines_dict_case(lambda d: d["pod"].update(hourly_usd=-1)), "pod.hourly_usd = -1"),
    (_machines_dict_case(lambda d: d["desk"].update(os="solaris")), "desk.os = 'solaris'"),
    (_machines_dict_case(lambda d: d["desk"].update(vram=24)), "desk.vram: unknown key"),
    (_machines_dict_case(lambda d: d["container"].update(host="laptop")), "container.host = 'laptop': not a machine of this file"),
    (_machines_dict_case(lambda d: d["pod"]["runpod"].update(image="runpod/base:latest")), "pod.runpod.image = 'runpod/base:latest'"),
    (_machines_dict_case(lambda d: d["pod"]["runpod"].update(pool_size=0)), "pod.runpod.pool_size = 0"),
    (_machines_dict_case(lambda d: d["pod"]["runpod"].update(cloud_types=["CHEAP"])), "pod.runpod.cloud_types[0] = 'CHEAP'"),
    (_machines_dict_case(lambda d: d["pod"]["runpod"].update(pod_env=["hf_token"])), "pod.runpod.pod_env[0] = 'hf_token'"),
    (_machines_dict_case(lambda d: d["desk"].pop("busy_card_limit_gib")), "desk: the key 'busy_card_limit_gib' is missing"),
    (lambda: MACHINES_TEXT + "desk:\n  description: again\n", "key 'desk' appears twice in one mapping (first on line 6)"),
    (lambda: MACHINES_TEXT.replace("  os: linux                 # WSL2", "   os: linux  # WSL2", 1), "machines.yaml, line 8"),
    (lambda: "- desk\n- pod\n", "<top level> = ['desk', 'pod']: not allowed; allowed: a mapping"),
]


@pytest.mark.parametrize("make,expect", MACHINES_CASES, ids=[f"machines-{i}" for i in range(len(MACHINES_CASES))])
def test_bad_machines_file_is_refused(tmp_path, make, expect):
    path = tmp_path / "machines.yaml"
    path.write_text(make())
    with pytest.raises(machines.MachinesError) as err:
        machines.load(path)
    assert expect in str(err.value), str(err.value)
    assert str(path) in str(err.value)


def test_missing_machines_file_is_named(tmp_path):
    with pytest.raises(machines.MachinesError, match=r"nope\.yaml: cannot be read \(No such file or directory\)"):
        machines.load(tmp_path / "nope.yaml")


def test_a_machines_file_checked_once_is_checked_again_when_its_bytes_change(tmp_path):
    # The same bytes are checked once per process (the config check and the workflow both load the file):
    # an edit between two loads is still refused, and a caller's change to its copy reaches no other caller.
    path = tmp_path / "machines.yaml"
    path.write_text(MACHINES_TEXT)
    first = machines.load(path)
    first["desk"]["ram_gib"] = -1
    assert machines.load(path)["desk"]["ram_gib"] == yaml.safe_load(MACHINES_TEXT)["desk"]["ram_gib"]
    path.write_text(MACHINES_TEXT.replace("  os: linux", "  os: solaris", 1))
    with pytest.raises(machines.MachinesError, match="desk.os = 'solaris'"):
        machines.load(path)


# ------------------------------------------------------------------------------- models.yaml
MODELS_TEXT = (REPO / "config" / "models.yaml").read_text()


def _models_case(mutate):
    def make():
        data = yaml.safe_load(MODELS_TEXT)
        mutate(data)
        return yaml.safe_dump(data, sort_keys=False)
    return make


MODELS_CASES = [
    (_models_case(lambda d: d.update(cuda_context_gib=-50)), "cuda_context_gib = -50: not allowed; allowed: a finite number >= 0 and <= 16"),
    (_models_case(lambda d: d.update(cuda_context_gib=math.nan)), "cuda_context_gib = .nan: NaN"),
    (_models_case(lambda d: d["bytes_per_param"].update(bf16=0)), "bytes_per_param.bf16 = 0"),
    (_models_case(lambda d: d["models"].pop("omnigen2")), "models: the key 'omnigen2' is missing"),
    (_models_case(lambda d: d["models"]["omnigen2"]["components"]["vae"].update(params="lots")),
     "models.omnigen2.components.vae.params = 'lots'"),
    (lambda: MODELS_TEXT.replace("params: 3.967e+9", "params: 3.967e9", 1),
     "models.omnigen2.components.transformer.params = '3.967e9': '3.967e9' is text in YAML: write 3.967e+9"),
    (_models_case(lambda d: d["models"]["omnigen2"].update(nf4_format="nf3")), "models.omnigen2.nf4_format = 'nf3'"),
    (_models_case(lambda d: d["models"]["omnigen2"]["measured"][0].update(gib=-1)), "models.omnigen2.measured[0].gib = -1"),
    (_models_case(lambda d: d["models"]["omnigen2"]["measured"][0].update(mode="train")), "models.omnigen2.measured[0].mode = 'train'"),
    (_models_case(lambda d: d["models"]["omnigen2"]["measured"][0].update(resident=["unet"])),
     "models.omnigen2.measured[0].resident: 'unet' is not a component of omnigen2"),
    (_models_case(lambda d: d["models"]["omnigen2"]["activations_gib"]["inference"].update(big=0.1)),
     "models.omnigen2.activations_gib.inference: key 'big' is not allowed"),
    (_models_case(lambda d: d["process_overhead"]["nf4"]["activations_reserve_by_references"].update(one=0.4)),
     "process_overhead.nf4.activations_reserve_by_references: key 'one' is not allowed; allowed: whole numbers >= 1"),
    (_models_case(lambda d: d["process_overhead"]["nf4"]["activations_reserve_by_references"].update({1: -0.1})),
     "process_overhead.nf4.activations_reserve_by_references[1] = -0.1: not allowed; allowed: a finite number >= 0"),
    (_models_case(lambda d: d["stages"].pop("default")), "stages: the key 'default' is missing"),
    (_models_case(lambda d: d["stages"]["render"].update(ram_gib=0)), "stages.render.ram_gib = 0"),
    (lambda: MODELS_TEXT + "cuda_context_gib: 0.7\n", "key 'cuda_context_gib' appears twice"),
    (_models_case(lambda d: d.update(gpu=1)), "gpu: unknown key"),
    (_models_case(lambda d: d["models"].update(empty={"kind": "generator"})), "models.empty"),
    (_models_case(lambda d: d["models"]["omnigen2"]["seconds"].update(load=-5)), "models.omnigen2.seconds.load = -5"),
    (_models_case(lambda d: d["models"]["omnigen2"]["measured"][0].pop("source")),
     "models.omnigen2.measured[0]: the key 'source' is missing"),
    (_models_case(lambda d: d["models"]["omnigen2"]["measured"][0].update(resolution=512.5)),
     "models.omnigen2.measured[0].resolution = 512.5: a decimal number"),
]


@pytest.mark.parametrize("make,expect", MODELS_CASES, ids=[f"models-{i}" for i in range(len(MODELS_CASES))])
def test_bad_models_file_is_refused(tmp_path, make, expect):
    path = tmp_path / "models.yaml"
    path.write_text(make())
    with pytest.raises(ConfigError) as err:
        load_model_facts(path)
    assert expect in str(err.value), str(err.value)
    assert str(path) in str(err.value)


# ---------------------------------------------------------------------------- the schemas
def _numbers(node, where=""):
    """Every number-typed schema node (JSON pointer-ish path, node)."""
    if isinstance(node, dict):
        kind = node.get("type")
        kinds = kind if isinstance(kind, list) else [kind]
        if {"number", "integer"} & set(kinds):
            yield where, node
        for key, sub in node.items():
            yield from _numbers(sub, f"{where}/{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _numbers(sub, f"{where}/{i}")


@pytest.mark.parametrize("name", ["schema.yaml", "machines.schema.yaml", "models.schema.yaml", "pod_life.schema.yaml"])
def test_every_number_in_a_schema_has_finite_bounds(name):
    schema = yamlcheck.load(REPO / "config" / name)
    # phenotype values are bounded by Anny's table (fourloops.anny_tables), checked in fourloops.config
    exempt = {"/properties/render/properties/body/properties/phenotype/additionalProperties"}
    for where, node in _numbers(schema):
        if where in exempt or "enum" in node:
            continue
        assert {"minimum", "exclusiveMinimum"} & set(node), f"{name}{where}: no lower bound"
        assert {"maximum", "exclusiveMaximum"} & set(node), f"{name}{where}: no upper bound"


def test_shipped_machines_and_models_files_are_valid():
    table = machines.load()
    assert set(machines.names(table)) == {"desk", "pod", "h200", "h200_pair"}
    assert machines.placeable(table) == ["desk", "pod"]  # the lent measurement machine is never a place to send a job
    facts = load_model_facts(REPO / "config" / "models.yaml")
    assert set(BACKENDS) <= set(facts["models"])


def test_models_schema_requires_every_backend():
    schema = yamlcheck.load(REPO / "config" / "models.schema.yaml")
    assert set(BACKENDS) <= set(schema["properties"]["models"]["required"])


# ---------------------------------------------------------------------------- Anny's tables
def test_anny_table_matches_the_installed_anny():
    """Regenerates the table from anny (imports anny, loads its cached model) and compares."""
    from fourloops import body

    assert body.anny_tables() == anny_tables.load(), "run: python -m fourloops.body"


def test_anny_table_matches_fourloops_body():
    from fourloops import body

    table = anny_tables.load()
    assert list(table["phenotype"]) == body.phenotype_keys()
    assert table["bones"] == body.bone_names()
    for rng in table["phenotype"].values():
        assert body.PHENOTYPE_RANGE[0] <= rng["min"] < rng["max"] <= body.PHENOTYPE_RANGE[1]


def test_the_config_check_imports_neither_anny_nor_torch():
    import subprocess
    import sys

    code = ("import sys; import fourloops.config, fourloops.machines, fourloops.asks; "
            "print(sorted(m for m in ('anny', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -------------------------------------------------------------------------------- the CLI
def _assert_refused(proc, expect, workdir, left=()):
    """Refused, saying `expect` (one text or several); nothing in `workdir` but `left` (Snakemake's own .snakemake,
    which a run that is not a dry-run makes before it reads the workflow)."""
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    for words in ([expect] if isinstance(expect, str) else expect):
        assert words in out, (words, out)
    assert "invalid" in out and "nothing was run or written" in out, out
    assert "Traceback" not in out, out
    assert sorted(p.name for p in workdir.iterdir()) == sorted(left), "the refused run wrote into its working directory"


# Through the CLI: the checks above are what the workflow's parse calls (rules/common.smk), and one refusal lists
# every problem, so one Snakemake run per stage of the check shows that each kind reaches the user, with its file
# and line, before any job; one a dry-run (nothing at all written), one a run (no result, model or log). The
# schema stage: YAML's surprises, a duplicate key, an empty mapping, NaN, an unknown Anny key, a stage's own
# schema slice (config/schema.d) and a --config value, all in one --configfile and one --config.
SCHEMA_STAGE = ("render:\n  camera:\n    elevation_deg: .nan\n  image_size: 512\n  image_size: 600\n"
                "  body:\n    phenotype: {wingspan: 0.5}\n"
                "conditions: {}\nfit:\n  min_keypoint_score: 1e-3\nlora:\n  target_modules: [to_q, to_qq]\n")
SCHEMA_STAGE_SAYS = [
    "extra.yaml, line 3: render.camera.elevation_deg = .nan: NaN is not a number",
    "extra.yaml, line 5, column 3: key 'image_size' appears twice in one mapping (first on line 4)",
    "extra.yaml, line 8: conditions = {}: an empty mapping does not empty it",
    "extra.yaml, line 7: render.body.phenotype.wingspan: unknown phenotype key",
    "extra.yaml, line 10: fit.min_keypoint_score = '1e-3': '1e-3' is text in YAML: write 1.0e-3",
    "extra.yaml, line 12: lora.target_modules[1] = 'to_qq': not allowed",   # the schema slice's own enum
    "--config: seed = 1e+23: a decimal number",
]
# The checks across keys, after the schema passes: the experiment's, and the restyle and LoRA stages'.
CROSS_STAGE = ("conditions:\n  A: {references: [0, 100], prompt: 'no placeholder'}\n"
               "restyle:\n  styles:\n    ink: ''\nlora:\n  smoke:\n    count: 50\n")
CROSS_STAGE_SAYS = [
    "conditions.A.references[1] = 100: no render at that azimuth",
    "conditions.A.prompt = 'no placeholder': the template must contain {azimuth}",
    "restyle.styles.ink = '': an empty instruction",
    "lora.smoke.count = 50: more records than azimuth pairs",
]


# The check that needs every rule (the Snakefile's, after the stage files): a literal artifact no rule makes.
UNMADE = "publish:\n  artifacts:\n    - {path: results/ladder.csv, kind: corpus}\n    - {path: results/nothing.csv, kind: corpus}\n"
UNMADE_SAYS = ("publish.artifacts[1].path = 'results/nothing.csv': no rule of this workflow makes it; allowed: a file a "
               "rule makes")


@pytest.mark.parametrize("extra,args,expect,left", [
    (SCHEMA_STAGE, ("-n", "--config", "model_set=smoke", "seed=1e23"), SCHEMA_STAGE_SAYS, []),
    (CROSS_STAGE, (), CROSS_STAGE_SAYS, [".snakemake"]),
    (UNMADE, ("-n",), UNMADE_SAYS, []),
], ids=["schema-dry-run", "across-keys-run", "every-rule-dry-run"])
def test_cli_refuses_every_problem_before_any_job_and_writes_nothing(tmp_path, extra, args, expect, left):
    workdir = tmp_path / "work"
    workdir.mkdir()
    (tmp_path / "extra.yaml").write_text(extra)
    argv = [f"--configfile={tmp_path / 'extra.yaml'}", *args, "--", "results/ladder.csv",
            "results/drift/ink.csv", "results/lora/camera.safetensors"]
    _assert_refused(run_snakemake(workdir, *argv, check=False, timeout=120), expect, workdir, left)


def test_no_cores_to_run_on_is_refused_before_any_job(tmp_path):
    """Snakemake takes --cores 0 (a profile's `cores: 0`) and then waits forever, no job started: refused."""
    proc = run_snakemake(tmp_path, "--cores", "0", "--", "results/render/az000.png", check=False, timeout=120)
    _assert_refused(proc, "--cores 0 (or a profile's `cores: 0`): no job could ever start, so the run would wait "
                          "forever; allowed: a whole number >= 1, or all", tmp_path, [".snakemake"])


def test_what_snakemake_ignores_under_its_executor_is_not_refused(tmp_path):
    """--local-cores (read nowhere by the pinned Snakemake 9.27.1) and --jobs beside --cores under the local executor
    (which runs on cores) were refused as 'no job could ever start', though Snakemake ran the job; under a remote
    executor (SLURM, RunPod) it is --jobs that no job could start without, and --cores that it ignores."""
    from types import SimpleNamespace

    from fourloops.config import scheduling_problems

    proc = run_snakemake(tmp_path, "--cores", "1", "--jobs", "0", "--local-cores", "0", "--",
                         "results/render/az000.png", check=False, timeout=300)
    assert proc.returncode == 0 and (tmp_path / "results" / "render" / "az000.png").is_file(), proc.stderr[-3000:]
    settings = SimpleNamespace(cores=0, nodes=0, local_cores=0)
    assert scheduling_problems(settings, local_exec=True) == [
        "--cores 0 (or a profile's `cores: 0`): no job could ever start, so the run would wait forever; allowed: a "
        "whole number >= 1, or all"]
    assert scheduling_problems(settings, local_exec=False) == [
        "--jobs 0 (or a profile's `jobs: 0`): no job could ever start, so the run would wait forever; allowed: a "
        "whole number >= 1"]
    assert scheduling_problems(SimpleNamespace(cores=0, nodes=50, local_cores=0), local_exec=False) == []


def _repo_copy(tmp_path: Path) -> Path:
    copy_root = tmp_path / "repo"
    copy_root.mkdir()
    for name in ("Snakefile", "rules", "config", "profiles", "src"):
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, copy_root / name)
    return copy_root


@pytest.mark.parametrize(
    "file,old,new,expect",
    [
        ("machines.yaml", "busy_card_limit_gib: 2.0  # RFD", "busy_card_limit_gib: 0  # RFD",
         "desk.busy_card_limit_gib = 0: not allowed; allowed: a finite number > 0"),
        ("models.yaml", "cuda_context_gib: 0.68", "cuda_context_gib: -50", "cuda_context_gib = -50: not allowed"),
        ("config.yaml", "azimuths: [0, 45, 90, 135, 180, 225, 270, 315]\n", "azimuths: [0, 45\n",
         "config.yaml, line 18, column 7: expected ',' or ']'"),
        # a file emptied (or only comments): Snakemake's own words named no file
        ("config.yaml", None, "# emptied\n", "config.yaml: holds nothing, not a mapping of config keys"),
    ],
)
def test_cli_refuses_a_bad_repository_file(tmp_path, file, old, new, expect):
    import subprocess

    from conftest import SNAKEMAKE, snakemake_env

    repo = _repo_copy(tmp_path)
    target = repo / "config" / file
    assert old is None or old in target.read_text()
    target.write_text(new if old is None else target.read_text().replace(old, new, 1))
    workdir = tmp_path / "work"
    workdir.mkdir()
    proc = subprocess.run(
        [SNAKEMAKE, "-s", str(repo / "Snakefile"), "--profile", str(repo / "profiles" / "smoke"),
         "--directory", str(workdir), "-n", "results/ladder.csv"],
        capture_output=True, text=True, env=snakemake_env(), timeout=120, cwd=workdir,
    )
    _assert_refused(proc, expect, workdir)


def test_a_configfile_value_the_profile_replaces_is_said_with_its_line(tmp_path):
    """The smoke profile's `config: [model_set=smoke]` is a --config, which Snakemake applies after every
    --configfile: `model_set: real` in a file planned the smoke set without a word."""
    extra = tmp_path / "extra.yaml"
    extra.write_text("seed: 3\nmodel_set: real\n")
    proc = run_snakemake(tmp_path, f"--configfile={extra}", "-n", "results/render/az000.png")
    assert (f"fourloops: note: {extra}, line 2: model_set = 'real' is replaced by the command line's model_set = "
            "'smoke' (a --config, or a profile's config: list, is applied after every --configfile)") in proc.stderr
    assert proc.stderr.count("fourloops: note:") == 1  # seed: no --config sets it
