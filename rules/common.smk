# Shared by the stage files: the config check, paths, wildcard constraints, input and params functions.
# What a job asks, its lineage, the walls and the preflight come from the stage declarations
# (src/fourloops/stages/*.py, read through fourloops.smk), not from here.
import gc
import json
import os
import sys
import tempfile
from pathlib import Path

# What Snakemake and its plugins built at import lives as long as the process: frozen, it is not scanned again by
# every full garbage collection the parse and the DAG trigger (Python's documented use of gc.freeze).
gc.freeze()

from snakemake.exceptions import WorkflowError

from fourloops import provenance, smk
from fourloops.backends import BACKENDS, SMOKE_BACKENDS
from fourloops.yamlcheck import load_problem
from fourloops.config import ConfigError, check_config, loaded_configfiles, schema_with_slices

# Snakemake's message for a malformed config file names neither file nor line: name both first.
_config_problem = load_problem(os.path.join(workflow.basedir, "config", "config.yaml"))
if _config_problem:
    raise WorkflowError(f"invalid config (nothing was run or written):\n  {_config_problem}")


configfile: os.path.join(workflow.basedir, "config", "config.yaml")


# The experiment schema plus each stage's own slice (config/schema.d/<key>.yaml), checked before any job.
# Written as JSON (also YAML): Snakemake's validate reads JSON first, in a fraction of YAML's time.
with tempfile.TemporaryDirectory(prefix="fourloops-schema-") as _tmp:
    _schema = Path(_tmp) / "schema.json"
    try:
        _schema.write_text(json.dumps(schema_with_slices(
            Path(workflow.basedir) / "config" / "schema.yaml", Path(workflow.basedir) / "config" / "schema.d"
        )))
        check_config(
            config, _schema, BACKENDS, SMOKE_BACKENDS, fill_defaults=validate,
            configfiles=loaded_configfiles(workflow), command_line=workflow.config_settings.config,
        )
    except ConfigError as err:
        raise WorkflowError(str(err)) from None

# Jobs read the top-level invocation from here for their provenance (secrets redacted).
os.environ.setdefault("FOURLOOPS_INVOCATION", provenance.redact(" ".join(sys.argv)))
os.environ.setdefault("FOURLOOPS_REPO", str(workflow.basedir))
# Every job ends when the Snakemake that parsed this dies (fourloops.lifeline watches this pid).
os.environ.update(FOURLOOPS_SNAKEMAKE_PID=str(os.getpid()))

SMOKE = config["model_set"] == "smoke"
SIZING = config["model_set"] == "sizing"  # the real models at their real shapes, random weights (rules/sizing.smk)
CONDITIONS = list(config["conditions"])
SOURCES = CONDITIONS + ["floor", "floor_gt"]


def az_tag(azimuth):
    return f"{int(azimuth):03d}"


RENDER_TAGS = [az_tag(a) for a in config["azimuths"]]
LADDER_TAGS = [az_tag(a) for a in config["ladder"]["azimuths"]]
STYLES = list(config["restyle"]["styles"])
RESTYLE_TAGS = [az_tag(a) for a in config["restyle"]["azimuths"]]


wildcard_constraints:
    az="|".join(sorted(set(RENDER_TAGS) | set(LADDER_TAGS))),
    condition="|".join(CONDITIONS),
    source="|".join(SOURCES),
    backend="|".join(SMOKE_BACKENDS),
    style="|".join(STYLES),


from fourloops import model_sets
from fourloops.model_sets import SMOKE_DETECTOR, SMOKE_GENERATOR_DIR, SMOKE_SCORER_DIR, sizing_model
from fourloops.stage import builds as sizing_builds, gpu as gpu_of, probed as probed_components

# fourloops' view of this workflow; the stage files use its ASKS (as resources) and LINEAGE (a param).
smk.check_model_set(config["model_set"])
try:  # models.yaml and machines.yaml are validated by their own schemas (config/*.schema.yaml)
    FOURLOOPS = smk.workflow_of(workflow, config)
except ValueError as err:  # ConfigError, MachinesError: the message names file, line, key and value
    raise WorkflowError(str(err)) from None
# A precision the Hailo target cannot run is refused now, not after the compile (RFD 1165).
from fourloops.hef import precision_problem

if _precision_problem := precision_problem(config["hef"], FOURLOOPS.machines):
    raise WorkflowError(f"invalid config (nothing was run or written):\n  {_precision_problem}")
# The LoRA's resolution and target modules against the architecture descriptions, not minutes into the run.
from fourloops.lora import config_problems as lora_config_problems

if _lora_problems := lora_config_problems(config):
    raise WorkflowError("invalid config (nothing was run or written):\n  " + "\n  ".join(_lora_problems))
ASKS = FOURLOOPS.resources()
LINEAGE = FOURLOOPS.lineage_param()
# Before the DAG is built, outputs are checked against their provenance records (a corrupted one reruns),
# and a stash of last good outputs left by a killed run is settled (fourloops.keep).
FOURLOOPS.check_outputs_before_the_dag()
FOURLOOPS.recover_last_good()


def generator_settings():
    """The generator as the run uses it: the configured one, or its smoke stand-in (fourloops.model_sets)."""
    return model_sets.generator(config)


def detector_settings():
    return model_sets.detector(config)


def camera_settings():
    return dict(config["render"]["camera"], image_size=config["render"]["image_size"])


def render_image(tag):
    return f"results/render/az{tag}.png"


def render_keypoints(tag):
    return f"results/render/az{tag}.json"


def get_generate_inputs(wildcards):
    cond = config["conditions"][wildcards.condition]
    inputs = {"references": [render_image(az_tag(a)) for a in cond["references"]]}
    inputs.update(model_sets.built_models(config, "generator"))
    if cond.get("lora", False):  # the camera LoRA (rules/lora.smk): a retrained one makes this condition stale
        inputs["lora"] = LORA_FILE
    return inputs


def get_generate_params(wildcards):
    cond = config["conditions"][wildcards.condition]
    return {
        "condition": wildcards.condition,
        "reference_azimuths": list(cond["references"]),
        "prompt": cond["prompt"],
        "lora": bool(cond.get("lora", False)),
        "azimuths": list(config["ladder"]["azimuths"]),
        "seed": config["seed"],
        "model_set": config["model_set"],
        "generator": generator_settings(),
    }


def get_keypoint_inputs(wildcards):
    if wildcards.kpset == "render":
        images = [render_image(t) for t in RENDER_TAGS]
        manifest = []
    elif wildcards.kpset.startswith("restyle/"):
        images = [f"results/{wildcards.kpset}/az{t}.png" for t in RESTYLE_TAGS]
        manifest = [f"results/{wildcards.kpset}/views.json"]
    else:
        images = [f"results/generate/{wildcards.kpset}/az{t}.png" for t in LADDER_TAGS]
        manifest = [f"results/generate/{wildcards.kpset}/views.json"]
    return {"images": images, "manifest": manifest, **model_sets.built_models(config, "detector")}


def get_fit_inputs(wildcards):
    if wildcards.source == "floor_gt":
        points = [render_keypoints(t) for t in RENDER_TAGS]
    elif wildcards.source == "floor":
        points = [f"results/keypoints/render/az{t}.json" for t in RENDER_TAGS]
    else:
        points = [f"results/keypoints/{wildcards.source}/az{t}.json" for t in LADDER_TAGS]
    return {"points": points, "skeleton": "results/render/skeleton.json"}


def get_fit_params(wildcards):
    azimuths = config["ladder"]["azimuths"] if wildcards.source in CONDITIONS else config["azimuths"]
    return {
        "source": wildcards.source,
        "kind": "ground_truth" if wildcards.source == "floor_gt" else "detector",
        "azimuths": list(azimuths),
        "camera": camera_settings(),
        "fit": dict(config["fit"]),
    }


def get_probe_inputs(wildcards):
    """The smoke and sizing sets' models are built by the workflow; real weights live in the HF cache (preflight
    checks them). Which ones: the component's GPU declaration (fourloops.stage.Gpu)."""
    gpu = gpu_of(wildcards.component)
    if SIZING:
        return {"model": sizing_model(gpu.build_for(gpu.settings(config)))}
    return gpu.smoke_inputs(config) if SMOKE and gpu.smoke_inputs is not None else {}


def get_ladder_inputs(wildcards):
    return {
        "fits": expand("results/fit/{source}.json", source=SOURCES),
        "manifests": expand("results/generate/{condition}/views.json", condition=CONDITIONS),
    }


def get_restyle_inputs(wildcards):
    return {"references": [render_image(t) for t in RESTYLE_TAGS], **model_sets.built_models(config, "generator")}


def get_restyle_params(wildcards):
    return {
        "style": wildcards.style,
        "instruction": config["restyle"]["styles"][wildcards.style],
        "azimuths": list(config["restyle"]["azimuths"]),
        "seed": config["restyle"]["seed"],
        "model_set": config["model_set"],
        "generator": generator_settings(),
    }


def get_drift_inputs(wildcards):
    return {
        "render": [f"results/keypoints/render/az{t}.json" for t in RESTYLE_TAGS],
        "restyled": [f"results/keypoints/restyle/{wildcards.style}/az{t}.json" for t in RESTYLE_TAGS],
    }


def hef_settings():
    return dict(config["hef"], dfc_wheel=os.path.expanduser(config["hef"]["dfc_wheel"]) if config["hef"]["dfc_wheel"] else None)


def hef_detector_inputs(wildcards):
    return model_sets.built_models(config, "detector")


def scorer_settings():
    return model_sets.scorer(config)


def get_grades_inputs(wildcards):
    inputs = {
        "renders": [render_image(t) for t in RESTYLE_TAGS],
        "restyled": [f"results/restyle/{wildcards.style}/az{t}.png" for t in RESTYLE_TAGS],
        "manifest": f"results/restyle/{wildcards.style}/views.json",
    }
    return inputs | model_sets.built_models(config, "scorer")


def get_grades_params(wildcards):
    g = config["grades"]
    return {
        "style": wildcards.style,
        "instruction": config["restyle"]["styles"][wildcards.style],
        "azimuths": list(config["restyle"]["azimuths"]),
        "scorer": scorer_settings(),
        "score_range": g["score_range"],
        "num_pass": g["num_pass"],
        "retries": g["retries"],
        "seed": g["seed"],
        "model_set": config["model_set"],
    }


# The camera LoRA (rules/lora.smk, config lora: in config/schema.d/lora.yaml).
LORA_NAME = config["lora"]["name"]
LORA_FILE = f"results/lora/{LORA_NAME}.safetensors"
# Resume checkpoints: not an output (Snakemake removes a failed job's outputs; these must outlive a kill).
LORA_CHECKPOINTS = f"results/lora/checkpoints/{LORA_NAME}"


def lora_record_settings():
    return model_sets.lora_records(config)


LORA_RECORD_TAGS = [az_tag(a) for a in lora_record_settings()["azimuths"]]


def get_lora_records_params(wildcards):
    rec = lora_record_settings()
    return {
        "azimuths": list(rec["azimuths"]),
        "count": rec["count"],
        "seed": rec["seed"],
        "instruction": rec["instruction"],
        "body": config["render"]["body"],
        "camera": camera_settings(),
        "background": config["render"]["background"],
    }


def get_lora_inputs(wildcards):
    inputs = {
        "records": "results/lora/records.jsonl",
        "images": expand("results/lora/records/az{az}.png", az=LORA_RECORD_TAGS),
    }
    return inputs | model_sets.built_models(config, "generator", sets=("smoke",))


def get_lora_train_inputs(wildcards):
    return get_lora_inputs(wildcards) | {"embeddings": "results/lora/embeddings.safetensors"}


def get_lora_embeddings_params(wildcards):
    return {
        **model_sets.lora_generator(config),
        "text_encoder_dtype": model_sets.lora_text_encoder_dtype(config),
        "max_sequence_length": 1024,
        "records": lora_record_settings()["count"],
        "model_set": config["model_set"],
    }


def get_lora_train_params(wildcards):
    return model_sets.lora_train(config)


def planned(*args):
    """fourloops.plan.planned for rules/report.smk's run_plan, imported only when that job is in the DAG (its
    walls, pods and levers cost every other parse ~10 ms)."""
    from fourloops.plan import planned as plan_of

    return plan_of(*args)
