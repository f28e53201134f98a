"""One place per stage: the declarations, lineage derived from imports, and a throwaway stage that the
wall check, the preflight, the plan and lineage all see with no other file edited."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, SNAKEMAKE, snakemake_env
from fourloops import lineage
from fourloops.stage import UnknownRule, registry, stage_for

FOURLOOPS = str(Path(sys.executable).with_name("fourloops"))


# ------------------------------------------------------------------------------ the declarations
def test_every_rule_with_outputs_has_exactly_one_stage():
    rules = set(registry())
    assert {"render", "generate", "keypoints", "keypoints_generated", "fit", "ladder", "smoke_generator",
            "smoke_detector", "probe_model", "publish"} <= rules
    assert stage_for("generate").profile == "pod" and stage_for("generate").keep_last_good
    assert stage_for("keypoints") is stage_for("keypoints_generated")
    with pytest.raises(UnknownRule, match="no stage declaration"):
        stage_for("no_such_rule")


def test_a_declaration_naming_no_code_module_is_refused(tmp_path, monkeypatch):
    pkg = tmp_path / "typo_declarations"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "toy.py").write_text("from fourloops.stage import Stage\n"
                                "STAGE = Stage(name='toy', code='fourloops.stages.toyy', rules=('toy',))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"typo_declarations.toy: code = 'fourloops.stages.toyy' names no module"):
        registry("typo_declarations")


def test_lineage_follows_the_imports_not_a_list():
    ladder = set(lineage.closure("fourloops.stages.ladder"))
    # stages/ladder.py imports fourloops.ladder, which imports camera and io: all three are in its lineage
    assert {"fourloops.stages.ladder", "fourloops.ladder", "fourloops.camera", "fourloops.io"} <= ladder
    assert "fourloops.generate" not in ladder and "fourloops.cli" not in ladder
    fit = set(lineage.closure("fourloops.stages.fit"))
    # the fit builds the config's camera (fourloops.camera), never the renderer: a renderer edit reaches the fits
    # only through the renders they read
    assert fit == {"fourloops", "fourloops.stages", "fourloops.stages.fit", "fourloops.fit", "fourloops.io",
                   "fourloops.camera"}
    assert "fourloops.generate" in lineage.closure("fourloops.stages.generate")



RULE_FUNCTIONS = REPO / "src" / "fourloops" / "rule_functions"


def test_each_rule_files_functions_are_its_own_and_common_smk_holds_none():
    """common.smk defines only the shared binder; a rule file imports functions from its own module alone, and
    every module there belongs to a rule file."""
    assert re.findall(r"^def (\w+)", (REPO / "rules" / "common.smk").read_text(), re.M) == ["with_config"]
    rule_files = {p.stem: p.read_text() for p in (REPO / "rules").glob("*.smk")}
    for stem, text in rule_files.items():
        if stem != "common":
            assert not re.search(r"^def ", text, re.M), f"rules/{stem}.smk defines a function (Snakemake's linter)"
        imported = set(re.findall(r"^from fourloops\.rule_functions\.(\w+) import", text, re.M))
        assert imported <= {stem}, f"rules/{stem}.smk imports the functions of {sorted(imported - {stem})}"
    modules = {p.stem for p in RULE_FUNCTIONS.glob("*.py")} - {"__init__"}
    assert modules - set(rule_files) == set(), f"no rule file for rule_functions/{sorted(modules - set(rule_files))}"


def test_no_jobs_lineage_holds_a_rule_function():
    """What the input and params functions return is in the job's inputs and params; their code is in no lineage,
    even where a stage module imports one (each says `LINEAGE = False`)."""
    for path in [*RULE_FUNCTIONS.glob("*.py"), REPO / "src" / "fourloops" / "names.py"]:
        assert lineage._follows(ast.parse(path.read_text())) is False, f"{path.name}: no `LINEAGE = False`"
    for stage in {s.code for s in registry().values() if s.code}:
        held = [m for m in lineage.closure(stage) if m.startswith("fourloops.rule_functions") or m == "fourloops.names"]
        assert held == [], f"{stage}'s lineage holds {held}"


HEAVY = ("numpy", "scipy", "torch", "triton", "PIL", "pandas", "matplotlib", "transformers", "diffusers")
DIGESTS = ("import sys\nfrom fourloops import lineage, smk\nfrom fourloops.stage import stages\n"
           "print({s.code: lineage.code_digest(s.code) for s in stages() if s.code})\n"
           f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n")


def _digests(home: Path) -> list[str]:
    return subprocess.run([sys.executable, "-c", DIGESTS], capture_output=True, text=True, check=True,
                          env=snakemake_env(HOME=str(home))).stdout.splitlines()


def test_the_stage_registry_and_every_lineage_import_none_of_the_jobs_libraries(tmp_path):
    """Parse time stays cheap: the declarations and each stage's lineage are read, not run."""
    assert _digests(tmp_path)[1] == "[]"


def test_lineage_read_from_its_cache_is_the_lineage_parsed_from_the_source(tmp_path):
    parsed = _digests(tmp_path)[0]                  # an empty cache: every module parsed
    cache = tmp_path / ".cache" / "fourloops" / "lineage.json"
    assert json.loads(cache.read_text())["modules"]
    assert _digests(tmp_path)[0] == parsed          # every module's imports from the cache
    cache.write_text("{not json")
    assert _digests(tmp_path)[0] == parsed          # a broken cache is only a missed shortcut
    assert json.loads(cache.read_text())["modules"]


# --------------------------------------------------------------------------- a copy of the workflow
TOY_RULE = '''
rule toy:
    input:
        skeleton="results/render/skeleton.json",
    output:
        out="results/toy/out.json",
        provenance="results/provenance/toy/toy.json",
    log:
        "logs/toy/toy.log",
    benchmark:
        "benchmarks/toy/toy.tsv"
    params:
        toy=config["toy"],
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/toy.py"
'''
TOY_SCRIPT = '''from fourloops.jobs import job
from fourloops.stages.toy import toy_stage

with job(snakemake) as run:
    run.record(**toy_stage(skeleton=snakemake.input.skeleton, out=snakemake.output.out))
'''
TOY_MODULE = '''"""A throwaway stage: counts the skeleton's joints (tests only)."""
from fourloops.io import read_json, write_json


def toy_stage(skeleton: str, out: str) -> dict:
    write_json(out, {"joints": len(read_json(skeleton)["names"])})
    return {}
'''
TOY_DECLARATION = '''"""The throwaway stage's declaration (tests only)."""
LINEAGE = False

from fourloops.stage import Knob, Stage


def ask(ctx, wildcards, params):
    from fourloops.asks import Ask

    gib = params["toy"]["vram_gib"]
    return Ask.of(gib, 1.0, source="toy: config toy.vram_gib", devices=("cuda",) if gib else ())


def needs(params):
    from fourloops.preflight import Need

    return [Need("checkpoint", params["toy"]["weights"], rule="toy")]


STAGE = Stage(name="toy", code="fourloops.stages.toy", rules=("toy",), profile="pod", ask=ask, needs=needs,
              knobs=(Knob(("toy",), "vram_gib", ("toy", "vram_gib"), "size", values=(20.0,)),))
'''
TOY_SCHEMA = '''description: The toy stage (tests only).
type: object
additionalProperties: false
default: {}
properties:
  vram_gib:
    description: VRAM the toy asks.
    type: number
    minimum: 0
    maximum: 200
    default: 40
  weights:
    description: A checkpoint the toy needs on a real run.
    type: string
    default: /nonexistent/toy.pth
'''


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory):
    """The workflow's own files (tracked and untracked-not-ignored), copied: edits here never touch the repo."""
    dest = tmp_path_factory.mktemp("repo") / "fourloops"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    for rel in files:
        if (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    return dest


def copy_env(repo: Path) -> dict:
    return snakemake_env(PYTHONPATH=f"{repo / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


def smk(repo: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [SNAKEMAKE, "-s", str(repo / "Snakefile"), "--profile", str(repo / "profiles" / "smoke"),
           "--directory", str(workdir), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=copy_env(repo), cwd=workdir, timeout=600)


def planned(proc) -> list[str]:
    out = proc.stdout + proc.stderr
    return sorted(line.split()[1].rstrip(":") for line in out.splitlines()
                  if line.startswith(("rule ", "localrule ")) and line.rstrip().endswith(":"))


def add_toy(repo: Path) -> Path:
    toy = repo.parent / "toy-repo"
    if not toy.exists():
        shutil.copytree(repo, toy)
        (toy / "rules" / "toy.smk").write_text(TOY_RULE)
        (toy / "scripts" / "toy.py").write_text(TOY_SCRIPT)
        (toy / "src" / "fourloops" / "stages" / "toy.py").write_text(TOY_MODULE)
        (toy / "src" / "fourloops" / "declarations" / "toy.py").write_text(TOY_DECLARATION)
        (toy / "config" / "schema.d").mkdir(exist_ok=True)
        (toy / "config" / "schema.d" / "toy.yaml").write_text(TOY_SCHEMA)
    return toy


# A throwaway GPU stage: its component declared once (fourloops.stage.Gpu), its rule's input and params functions
# in its own module, in its own six files.
LAMP_RULE = """from fourloops.rule_functions.lamp import get_lamp_inputs, get_lamp_params


rule lamp:
    input:
        unpack(with_config(get_lamp_inputs)),
    output:
        out="results/lamp/out.json",
        provenance="results/provenance/lamp/lamp.json",
    log:
        "logs/lamp/lamp.log",
    benchmark:
        "benchmarks/lamp/lamp.tsv"
    params:
        lamp=with_config(get_lamp_params),
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/lamp.py"
"""
LAMP_SCRIPT = """from pathlib import Path

from fourloops.io import read_json, write_json
from fourloops.jobs import job

with job(snakemake) as run:
    built = read_json(Path(snakemake.input.model) / "lamp.json") if hasattr(snakemake.input, "model") else None
    write_json(snakemake.output.out, {"settings": snakemake.params.lamp, "model": built})
"""
LAMP_FUNCTIONS = '''"""rules/lamp.smk's input and params functions (tests only)."""
LINEAGE = False

from fourloops.model_sets import sizing_model
from fourloops.stage import gpu


def get_lamp_inputs(config, wildcards):
    """The sizing set's lamp, built by the workflow; none on the real set."""
    return {"model": sizing_model("lamp")} if config["model_set"] == "sizing" else {}


def get_lamp_params(config, wildcards):
    return gpu("lamp").settings(config)
'''
LAMP_MODULE = '''"""A throwaway GPU stage (tests only): its component is probed and sized like the real ones."""
import time
from pathlib import Path

from fourloops.io import read_json, write_json


def probe_lamp(settings, memory, references, items, prompt):
    t0 = time.perf_counter()
    built = read_json(Path(settings["model"]) / "lamp.json")
    rows = [{"seconds": 0.001} for _ in range(items)]
    return time.perf_counter() - t0, {"weights_gib": None, "model": built}, [
        {"error": None, "peak_vram_gib": None, "nvml_process_gib": None, "seconds_per_item": 0.001, "items": rows}]


def build_lamp(out, device, texts, arch_dir):
    write_json(Path(out) / "lamp.json", {"bulbs": 17})
    return {"parts": {}, "classes": {"model": "lamp"}, "parameters": {"model": 17}, "save_seconds": 0.0}
'''
LAMP_DECLARATION = '''"""The lamp's declaration (tests only)."""
LINEAGE = False

from fourloops import model_sets
from fourloops.stage import Build, Gpu, Knob, Stage


def settings(config):
    s = dict(config["lamp"])
    if config["model_set"] == "sizing":
        s["model"] = model_sets.sizing_model("lamp")
    return s


def key(s):
    return f"lamp/{s['vram_gib']:g}"


def gpu_ask(facts, s):
    from fourloops.asks import Ask

    return Ask.of(s["vram_gib"], 1.0, source="lamp: config lamp.vram_gib", devices=("cuda",) if s["vram_gib"] else ())


LAMP = Gpu(name="lamp", key=key, probe="fourloops.stages.lamp:probe_lamp", settings=settings, ask=gpu_ask,
           knobs=(Knob((), "vram_gib", ("lamp", "vram_gib"), "size", values=(20.0,)),),
           builds=(Build("lamp", "rfdetr_keypoint_preview", "fp32", builder="fourloops.stages.lamp:build_lamp"),),
           precision=lambda s: "fp32")


def ask(ctx, wildcards, params):
    return LAMP.ask(ctx.facts, params["lamp"])


STAGE = Stage(name="lamp", code="fourloops.stages.lamp", rules=("lamp",), profile="desk", ask=ask,
              knobs=LAMP.knobs_at(("lamp",)), gpus=(LAMP,))
'''
LAMP_SCHEMA = """description: The lamp, a throwaway GPU stage (tests only).
type: object
additionalProperties: false
default: {}
properties:
  vram_gib:
    description: VRAM one load of the lamp asks.
    type: number
    minimum: 0
    maximum: 200
    default: 40
  device:
    description: Where the lamp loads.
    type: string
    default: cpu
"""
LAMP_FILES = {"rules/lamp.smk": LAMP_RULE, "scripts/lamp.py": LAMP_SCRIPT, "src/fourloops/stages/lamp.py": LAMP_MODULE,
              "src/fourloops/declarations/lamp.py": LAMP_DECLARATION,
              "src/fourloops/rule_functions/lamp.py": LAMP_FUNCTIONS, "config/schema.d/lamp.yaml": LAMP_SCHEMA}


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()
            and "__pycache__" not in p.parts}


def test_a_new_gpu_stage_in_its_own_files_is_refused_with_its_knob_and_probed_under_the_sizing_rules(repo_copy,
                                                                                                       tmp_path):
    """Its rule, script, code and declaration modules, rule functions and config slice: the refusal reads the settings its params
    function gives, and under the sizing set its input function makes its job read the build."""
    lamp = tmp_path / "lamp-repo"
    shutil.copytree(repo_copy, lamp, ignore=shutil.ignore_patterns("__pycache__"))
    for rel, text in LAMP_FILES.items():
        (lamp / rel).write_text(text)
    # its own files and nothing else: no probe, sizing, asks, levers or common file edited (rules/common.smk
    # included: its input and params functions are in its own module)
    before, after = _tree(repo_copy), _tree(lamp)
    assert {k for k in after if before.get(k) != after[k]} == set(LAMP_FILES)
    # refused on the desk (40 GiB asked, 24 there): its own job and its probe, each offered its own knob
    cmd = [FOURLOOPS, "plan", "-s", str(lamp / "Snakefile"), "--directory", str(tmp_path / "real"),
           "results/lamp/out.json", "results/probe/desk/lamp.json"]
    plan = subprocess.run(cmd, capture_output=True, text=True, env=copy_env(lamp), cwd=tmp_path, timeout=300)
    out = plan.stdout + plan.stderr
    assert plan.returncode == 2, out[-3000:]
    for rule in ("lamp", "probe_model"):
        block = out[out.index(f"rule {rule}, 1 job(s)"):]
        block = block[:block.index("reaches it")]
        assert "lamp: config lamp.vram_gib" in block, block
        assert re.search(r"^  lamp\.vram_gib: 20\.0 +20\.00 GiB .*desk \(here\)", block, re.M), block
    # probed under the sizing set's rules: its build made by its own builder, its probe run, its record
    # beside the build's
    small = tmp_path / "sizing.yaml"
    small.write_text("lamp:\n  vram_gib: 0\nsizing:\n  build_device: cpu\n")
    sized = tmp_path / "sized"
    cmd = [SNAKEMAKE, "-s", str(lamp / "Snakefile"), "--profile", str(lamp / "profiles" / "sizing"),
           "--directory", str(sized), "-c1", f"--configfile={small}", "--", "results/probe/desk/lamp.json",
           "results/lamp/out.json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=copy_env(lamp), cwd=tmp_path, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert planned(proc) == ["lamp", "probe_model", "sizing_model"], out[-3000:]
    # the lamp's job: its params from its params function, its input (the build) from its input function
    assert json.loads((sized / "results" / "lamp" / "out.json").read_text()) == {
        "settings": {"vram_gib": 0, "device": "cpu", "model": "models/sizing/lamp"}, "model": {"bulbs": 17}}
    assert json.loads((sized / "models" / "sizing" / "lamp" / "lamp.json").read_text()) == {"bulbs": 17}
    record = json.loads((sized / "results" / "probe" / "desk" / "lamp.json").read_text())
    assert (record["component"], record["key"], record["model_set"], record["model"]) == (
        "lamp", "lamp/0", "sizing", {"bulbs": 17})
    assert record["sizing_model"]["component"] == "lamp" and record["sizing_model"]["parameters"] == {"model": 17}


@contextlib.contextmanager
def edited(path: Path, append: str):
    """`path` with a line appended, restored afterwards (the module-scoped copy serves several tests)."""
    text = path.read_text()
    path.write_text(text + append)
    try:
        yield
    finally:
        path.write_text(text)


def test_a_changed_module_marks_exactly_the_jobs_whose_code_imports_it(repo_copy, built_copy):
    assert "Nothing to be done" in (smk(repo_copy, built_copy, "-n", "results/ladder.csv")).stdout
    for module in ("cli.py", "declarations/generate.py"):  # no stage runs either
        with edited(repo_copy / "src" / "fourloops" / module, "\n# an edit no stage runs\n"):
            proc = smk(repo_copy, built_copy, "-n", "results/ladder.csv")
            assert "Nothing to be done" in proc.stdout, proc.stdout[-2000:]
    with edited(repo_copy / "src" / "fourloops" / "ladder.py", "\n# an edit only the ladder runs\n"):
        proc = smk(repo_copy, built_copy, "-n", "results/ladder.csv")
        assert planned(proc) == ["ladder"], proc.stdout[-3000:]
        assert "params have changed" in proc.stdout.lower()


LORA_STAGES = ("lora_records", "lora_embeddings", "lora_train")


def code_digests(repo: Path, stages: tuple[str, ...]) -> dict[str, str]:
    """Each stage's code digest as a fresh process computes it from `repo`'s sources."""
    script = ("import json, sys; from fourloops import lineage; "
              "print(json.dumps({s: lineage.code_digest('fourloops.stages.' + s) for s in sys.argv[1:]}))")
    proc = subprocess.run([sys.executable, "-c", script, *stages], capture_output=True, text=True, check=True,
                          env=copy_env(repo))
    return json.loads(proc.stdout)


DIGESTED = ("generate", "restyle", "keypoints", "grades", *LORA_STAGES)


@pytest.mark.parametrize("edit,stale", [
    ("generate.py", {"generate", "restyle"}),             # inference: the views, never the LoRA
    ("lora.py", {"lora_train"}),                          # the LoRA's training
    ("keypoints.py", {"keypoints"}),                      # the detector: never the LoRA (it reads no keypoints)
    ("declarations/generate.py", set()),                  # an ask, a knob, a need: where a job runs, not its code
    ("declarations/lora_train.py", set()),
    ("lora_config.py", set()),                            # the parse-time check of the LoRA's config
], ids=lambda x: x if isinstance(x, str) else None)
def test_an_edit_changes_the_code_of_exactly_the_stages_that_run_it(repo_copy, edit, stale):
    before = code_digests(repo_copy, DIGESTED)
    with edited(repo_copy / "src" / "fourloops" / edit, "\n# an edit\n"):
        after = code_digests(repo_copy, DIGESTED)
    assert {s for s in DIGESTED if after[s] != before[s]} == stale


def test_the_loras_lineage_is_its_own_code_and_nothing_more():
    """Written out by hand: a module that joins the LoRA's lineage retrains it on a pod when it changes."""
    own = {"fourloops", "fourloops.io", "fourloops.stages"}
    assert set(lineage.closure("fourloops.stages.lora_train")) == own | {
        "fourloops.stages.lora_train", "fourloops.lora", "fourloops.lora_file", "fourloops.lora_records",
        "fourloops.lora_embeddings", "fourloops.loading", "fourloops.hub", "fourloops.figures",
        "fourloops.determinism"}
    assert set(lineage.closure("fourloops.stages.lora_embeddings")) == own | {
        "fourloops.stages.lora_embeddings", "fourloops.lora_embeddings", "fourloops.lora_records",
        "fourloops.loading", "fourloops.hub", "fourloops.determinism"}
    for stage in {s.code for s in registry().values() if s.code}:
        held = [m for m in lineage.closure(stage) if m.startswith("fourloops.declarations") or m == "fourloops.stage"]
        assert held == [], f"{stage}'s lineage holds {held}"


def test_an_inference_edit_reruns_the_views_and_what_reads_them_never_the_lora(repo_copy, built_copy):
    with edited(repo_copy / "src" / "fourloops" / "generate.py", "\n# an edit to inference only\n"):
        proc = smk(repo_copy, built_copy, "-n", "results/ladder.csv")
    got = planned(proc)
    assert got == sorted(["generate"] * 4 + ["keypoints_generated"] * 4 + ["fit"] * 4 + ["ladder"]), \
        proc.stdout[-3000:]


# ------------------------------------------------------------------------- staleness follows the bytes
def test_a_machine_setting_marks_nothing_stale(repo_copy, built_copy):
    """The busy-card guard's limit is where a job runs, not what it makes: 2 -> 3 GiB rebuilds nothing."""
    machines = repo_copy / "config" / "machines.yaml"
    text = machines.read_text()
    assert "busy_card_limit_gib: 2.0" in text
    try:
        machines.write_text(text.replace("busy_card_limit_gib: 2.0", "busy_card_limit_gib: 3.0"))
        proc = smk(repo_copy, built_copy, "-n", "results/ladder.csv")
        assert "Nothing to be done" in proc.stdout, proc.stdout[-3000:]
    finally:
        machines.write_text(text)


def test_a_smoke_setting_marks_only_the_jobs_that_use_it(built_copy, tmp_path):
    steps = tmp_path / "steps.yaml"
    steps.write_text("smoke:\n  generator_steps: 3\n")
    proc = smk(REPO, built_copy, f"--configfile={steps}", "-n", "results/ladder.csv")
    got = planned(proc)
    # the four generate jobs and what reads them; never the renders, their keypoints, the floors or the LoRA
    # (its jobs take the generator's model, not its sampling steps)
    assert got == sorted(["generate"] * 4 + ["keypoints_generated"] * 4 + ["fit"] * 4 + ["ladder"]), got
    wildcards = set(re.findall(r"^\s+wildcards: (.*)$", proc.stdout, re.M))
    assert wildcards == {f"{k}={c}" for k in ("condition", "kpset", "source") for c in "ABCD"}, wildcards


def test_a_new_stage_is_seen_by_walls_preflight_plan_and_lineage(repo_copy, built_copy, tmp_path):
    toy = add_toy(repo_copy)
    # walls: 40 GiB asked, the desk has 24: refused before any job, naming the rule and the toy's own source
    proc = smk(toy, built_copy, "results/toy/out.json")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "walls:" in out and "rule toy, 1 job(s)" in out, out[-3000:]
    assert "toy: config toy.vram_gib" in out and "fits pod" in out
    # its own knob among the levers, re-asked through its own ask: 20 GiB fits the desk
    assert re.search(r"^  toy\.vram_gib: 20\.0 +20\.00 GiB .*desk \(here\)", out, re.M), out[-3000:]
    assert not (built_copy / "results" / "toy").exists()
    # the plan: the toy's job, its profile, its verdict on each machine
    cmd = [FOURLOOPS, "plan", "--json", "-s", str(toy / "Snakefile"), "--profile", str(toy / "profiles" / "smoke"),
           "--directory", str(built_copy), "results/toy/out.json"]
    plan = subprocess.run(cmd, capture_output=True, text=True, env=copy_env(toy), cwd=built_copy, timeout=300)
    assert plan.returncode == 2, plan.stderr[-2000:]
    jobs = json.loads(plan.stdout)["jobs"]
    assert [(j["rule"], j["profile"], j["verdict"][:8]) for j in jobs] == [("toy", "pod", "REFUSED:")]
    plan = subprocess.run(cmd + ["--machine", "pod"], capture_output=True, text=True, env=copy_env(toy),
                          cwd=built_copy, timeout=300)
    assert plan.returncode == 0 and json.loads(plan.stdout)["jobs"][0]["verdict"] == "fits", plan.stderr[-2000:]
    # the preflight (a real run, in its own directory): the toy's checkpoint is named before any job
    real = tmp_path / "real"
    real.mkdir()
    cmd = [SNAKEMAKE, "-s", str(toy / "Snakefile"), "--directory", str(real), "-c1", "--resources", "vram_mb=46000",
           "--config", "model_set=real", "machine=pod", "--", "results/toy/out.json"]  # the pod's card, as profiles/pod
    proc = subprocess.run(cmd, capture_output=True, text=True, env=copy_env(toy), cwd=real, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "weights /nonexistent/toy.pth (rule toy): does not exist" in out, out[-3000:]
    assert not (real / "results").exists() and not (real / ".fourloops-model-set").exists()
    # lineage: built once (a small ask fits), then an edit of the toy's module makes exactly the toy stale
    small = tmp_path / "small.yaml"
    small.write_text("toy:\n  vram_gib: 0\n")
    proc = smk(toy, built_copy, f"--configfile={small}", "results/toy/out.json")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert json.loads((built_copy / "results" / "toy" / "out.json").read_text()) == {"joints": 17}
    assert "Nothing to be done" in smk(toy, built_copy, f"--configfile={small}", "-n", "results/toy/out.json").stdout
    module = toy / "src" / "fourloops" / "stages" / "toy.py"
    module.write_text(module.read_text() + "\n# edited\n")
    proc = smk(toy, built_copy, f"--configfile={small}", "-n", "results/toy/out.json")
    assert planned(proc) == ["toy"], proc.stdout[-3000:]


def test_the_batch_a_job_runs_at_is_in_the_identity_of_the_stages_whose_bytes_follow_it():
    """generate, restyle, lora_train, the keypoints rules and grades carry their resolved batch into their lineage
    (an `auto` that resolves to another batch on another machine reruns them); a stage whose bytes do not follow a
    batch carries nothing."""
    from types import SimpleNamespace

    from fourloops.smk import Workflow

    wf = Workflow.__new__(Workflow)
    wf.placement = SimpleNamespace(ask=lambda rule, wildcards: SimpleNamespace(batch=3))
    for rule in ("generate", "restyle", "lora_train", "keypoints_generated", "keypoints_restyled", "grades"):
        assert wf._batch_identity(rule, {}) == {"batch": 3}, rule
    for rule in ("fit", "ladder", "lora_embeddings", "render"):
        assert wf._batch_identity(rule, {}) is None, rule
