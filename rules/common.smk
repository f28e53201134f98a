# Helpers shared by the stage files: config checks, paths, input functions, resource asks.
import json
import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from fourloops import asks, provenance
from fourloops.backends import BACKENDS, SMOKE_BACKENDS
from fourloops.config import ConfigError, check_config

try:
    check_config(
        config,
        Path(workflow.basedir) / "config" / "schema.yaml",
        BACKENDS,
        SMOKE_BACKENDS,
        fill_defaults=validate,
    )
except ConfigError as err:
    raise WorkflowError(str(err)) from None

# Jobs read the top-level invocation from here for their provenance (secrets redacted).
os.environ.setdefault("FOURLOOPS_INVOCATION", provenance.redact(" ".join(sys.argv)))
os.environ.setdefault("FOURLOOPS_REPO", str(workflow.basedir))
# Jobs watch this Snakemake's pid and end when it dies (fourloops.lifeline); each Snakemake that
# parses the workflow starts its own jobs, so it is set, not defaulted.
os.environ["FOURLOOPS_SNAKEMAKE_PID"] = str(os.getpid())

SMOKE = config["model_set"] == "smoke"
CONDITIONS = list(config["conditions"])
SOURCES = CONDITIONS + ["floor", "floor_gt"]


def az_tag(azimuth):
    return f"{int(azimuth):03d}"


RENDER_TAGS = [az_tag(a) for a in config["azimuths"]]
LADDER_TAGS = [az_tag(a) for a in config["ladder"]["azimuths"]]


wildcard_constraints:
    az="|".join(sorted(set(RENDER_TAGS) | set(LADDER_TAGS))),
    condition="|".join(CONDITIONS),
    source="|".join(SOURCES),
    backend="|".join(SMOKE_BACKENDS),


SMOKE_GENERATOR_DIR = "models/smoke/generator-{backend}"
SMOKE_DETECTOR = "models/smoke/rfdetr-keypoint.pth"


def generator_settings():
    """The generator as the run uses it: the configured one, or its smoke stand-in."""
    gen = dict(config["generator"])
    if SMOKE:
        backend = config["smoke"]["generator_backend"]
        gen.update(
            backend=backend,
            model=SMOKE_GENERATOR_DIR.format(backend=backend),
            revision=None,
            precision="fp32",
            device="cpu",
            steps=config["smoke"]["generator_steps"],
            size=config["smoke"]["generator_size"],
        )
    return gen


def detector_settings():
    det = dict(config["keypoints"])
    if SMOKE:
        det.update(weights=SMOKE_DETECTOR, device="cpu", resolution=config["smoke"]["keypoints_resolution"])
    else:
        det["weights"] = os.path.expanduser(det["weights"])
    return det


def camera_settings():
    return dict(config["render"]["camera"], image_size=config["render"]["image_size"])


def render_image(tag):
    return f"results/render/az{tag}.png"


def render_keypoints(tag):
    return f"results/render/az{tag}.json"


def get_generate_inputs(wildcards):
    cond = config["conditions"][wildcards.condition]
    inputs = {"references": [render_image(az_tag(a)) for a in cond["references"]]}
    if SMOKE:
        inputs["model"] = generator_settings()["model"]
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
    else:
        images = [f"results/generate/{wildcards.kpset}/az{t}.png" for t in LADDER_TAGS]
        manifest = [f"results/generate/{wildcards.kpset}/views.json"]
    inputs = {"images": images, "manifest": manifest}
    if SMOKE:
        inputs["weights"] = SMOKE_DETECTOR
    return inputs


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
    """The smoke set's models are built by the workflow; real weights live in the HF cache (preflight checks them)."""
    if not SMOKE:
        return {}
    if wildcards.component == "generator":
        return {"model": generator_settings()["model"]}
    return {"weights": SMOKE_DETECTOR}


def get_ladder_inputs(wildcards):
    return {
        "fits": expand("results/fit/{source}.json", source=SOURCES),
        "manifests": expand("results/generate/{condition}/views.json", condition=CONDITIONS),
    }


# What each job asks of the machine (the wall check compares these with config/machines.yaml).
# Every rule's resources call the ask_* functions below with its own name; the numbers come from
# config/models.yaml facts and the job's params, or from measurements (probes, earlier provenance).
from fourloops import walls

MODEL_FACTS = asks.load_facts(Path(workflow.basedir) / "config" / "models.yaml")
MACHINES = walls.load_machines(Path(workflow.basedir) / "config" / "machines.yaml")
MEASURED = asks.Measurements.load(Path.cwd())
_ASKS = {}


def _compute_ask(rulename, wildcards):
    if rulename == "generate":
        refs = len(config["conditions"][wildcards.condition]["references"])
        n = len(config["ladder"]["azimuths"])
        if SMOKE:
            return asks.stage_ask(MODEL_FACTS, "smoke_generate")
        return asks.generator_ask(
            MODEL_FACTS, generator_settings(), n_references=refs, n_views=n, measured=MEASURED, machine=config["machine"]
        )
    if rulename in ("keypoints", "keypoints_generated"):
        n = len(RENDER_TAGS) if rulename == "keypoints" else len(LADDER_TAGS)
        return asks.detector_ask(MODEL_FACTS, detector_settings(), n_images=n, measured=MEASURED, machine=config["machine"])
    if rulename == "probe_model":
        if SMOKE:  # the tiny models on the CPU
            return asks.stage_ask(MODEL_FACTS, "smoke_generate")
        if wildcards.component == "generator":
            return asks.generator_ask(MODEL_FACTS, generator_settings(), measured=None)
        return asks.detector_ask(MODEL_FACTS, detector_settings(), measured=None)
    return asks.stage_ask(MODEL_FACTS, rulename)


def job_ask(rulename, wildcards):
    key = (rulename, tuple(sorted(dict(wildcards.items()).items())))
    if key not in _ASKS:
        _ASKS[key] = _compute_ask(rulename, wildcards)
    return _ASKS[key]


def ask_vram_mb(wildcards, rulename):
    return job_ask(rulename, wildcards).vram_mb


def ask_mem_mb(wildcards, rulename):
    return job_ask(rulename, wildcards).mem_mb


def ask_devices(wildcards, rulename):
    return ",".join(job_ask(rulename, wildcards).devices) or "none"


def ask_licensed(wildcards, rulename):
    return ",".join(job_ask(rulename, wildcards).licensed) or "none"


def ask_os(wildcards, rulename):
    return job_ask(rulename, wildcards).os


def ask_arch(wildcards, rulename):
    return job_ask(rulename, wildcards).arch


def check_walls(dag, machine_name=None):
    """Every pending job against the target machine (config machine): a fourloops.walls.Verdict."""
    jobs = walls.jobs_from_dag(dag, job_ask)
    provided = workflow.global_resources.get("vram_mb")
    provided = getattr(provided, "value", provided)
    provided = int(provided) if isinstance(provided, (int, float)) and provided < 2**40 else None
    # Under the RunPod executor, pod-tagged jobs run on the pod: they meet the pod's walls.
    executor = getattr(workflow.executor_plugin, "name", None)
    placement = {"pod": "pod"} if executor == "runpod" else None
    return walls.check_jobs(jobs, MACHINES, machine_name or config["machine"], provided, placement)


# Lineage: each job's params carry a digest of everything upstream of it (config slices and the
# library sources each stage runs), so a change marks every downstream job stale by its params even
# where an intermediate file is missing (Snakemake does not rerun an up-to-date job for a missing
# intermediate input), and a library change marks the stages that run it.
import functools
import hashlib
from types import SimpleNamespace

LIBRARY = Path(workflow.basedir) / "src" / "fourloops"


def _digest(*parts):
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@functools.cache
def library_digest(*modules):
    return _digest(*[(m, hashlib.sha256((LIBRARY / m).read_bytes()).hexdigest()) for m in sorted(modules)])


def render_lineage():
    return _digest(
        library_digest("body.py", "render.py", "camera.py", "coco.py", "stages.py", "io.py"),
        config["render"], config["azimuths"], config["model_set"],
    )


def generate_lineage(condition):
    return _digest(
        render_lineage(), library_digest("generate.py", "smoke_generators.py", "stages.py", "io.py"),
        get_generate_params(SimpleNamespace(condition=condition)), config["smoke"] if SMOKE else None,
    )


def keypoints_lineage(kpset):
    upstream = render_lineage() if kpset == "render" else generate_lineage(kpset)
    return _digest(upstream, library_digest("keypoints.py", "coco.py", "stages.py"), detector_settings(),
                   config["smoke"] if SMOKE else None)


def fit_lineage(source):
    if source == "floor_gt":
        upstream = render_lineage()
    else:
        upstream = keypoints_lineage("render" if source == "floor" else source)
    params = get_fit_params(SimpleNamespace(source=source))
    return _digest(upstream, library_digest("fit.py", "camera.py", "stages.py"), params)


def get_render_lineage(wildcards):
    return render_lineage()


def get_generate_lineage(wildcards):
    return generate_lineage(wildcards.condition)


def get_keypoints_lineage(wildcards):
    return keypoints_lineage(wildcards.kpset)


def get_fit_lineage(wildcards):
    return fit_lineage(wildcards.source)


def get_ladder_lineage(wildcards):
    return _digest([fit_lineage(s) for s in SOURCES], library_digest("ladder.py", "stages.py"))


def get_smoke_lineage(wildcards):
    return library_digest("smoke_generators.py", "generate.py", "keypoints.py", "stages.py")


def get_busy_card_limit_gib(wildcards):
    """The busy-card guard's limit on the machine this run targets (RFD 1140: 2 GiB)."""
    return walls.machine(MACHINES, config["machine"]).busy_card_limit_gib


# A working directory holds one model set: smoke outputs never mix with real ones. (A `--config` on
# the command line replaces a profile's `config:` list, so `--profile profiles/smoke --config x=1`
# silently asks for the real set; this catches it.)
MODEL_SET_MARKER = Path(".fourloops-model-set")
if MODEL_SET_MARKER.exists() and MODEL_SET_MARKER.read_text().strip() != config["model_set"]:
    raise WorkflowError(
        f"model_set = {config['model_set']!r}, but this working directory ({Path.cwd()}) holds "
        f"{MODEL_SET_MARKER.read_text().strip()!r} outputs; allowed: {MODEL_SET_MARKER.read_text().strip()!r} here. "
        "A --config on the command line replaces the profile's config list: add model_set=smoke to it "
        "for the smoke set, or run the real set in its own directory."
    )


# A failed rerun keeps the last good outputs of these rules (fourloops.keep): stashed in onstart,
# settled in onsuccess/onerror; a stash left by a killed Snakemake is settled here, before the DAG.
from fourloops import keep

KEEP_RULES = {"generate"}
keep.recover(Path.cwd())


def keep_files(job):
    """A job's outputs, with Snakemake's metadata record and incomplete marker of each (file backend)."""
    p = workflow.persistence
    outputs = [str(f) for f in job.output]
    if not hasattr(p, "_record_path"):  # the database backend keeps its records elsewhere
        return keep.JobFiles(outputs)
    return keep.JobFiles(
        outputs,
        records=[p._record_path(p._metadata_path, f) for f in outputs],
        markers=[p._record_path(p._incomplete_path, f) for f in outputs],
    )


onsuccess:
    keep.settle(Path.cwd())


onerror:
    for path in keep.settle(Path.cwd()):
        print(f"kept the last good {path} (its new generation failed)", file=sys.stderr)


onstart:
    MODEL_SET_MARKER.write_text(config["model_set"] + "\n")
    # Walls first (seconds, no torch): refuse what cannot fit on the target machine before any job.
    verdict = check_walls(workflow.dag)
    if not verdict.ok:
        raise WorkflowError(walls.report(verdict, MACHINES))
    # A real run checks, before its first job, that every model, weight file and device the pending
    # jobs need is here; it never falls back to the smoke models.
    if not SMOKE:
        from fourloops import preflight

        # Under the RunPod executor, pod jobs meet their needs on the pod (CUDA there; it fetches the
        # weights into its own cache), so only the jobs that run here are checked here.
        remote = {"pod"} if getattr(workflow.executor_plugin, "name", None) == "runpod" else set()
        pending = [
            (job.rule.name, dict(job.params.items()))
            for job in workflow.dag.needrun_jobs()
            if str(getattr(job.rule.resources.get("profile"), "raw", job.rule.resources.get("profile"))) not in remote
        ]
        missing = preflight.problems(pending)
        if missing:
            raise WorkflowError(preflight.report(missing))
    keep.stash(Path.cwd(), [keep_files(j) for j in workflow.dag.needrun_jobs() if j.rule.name in KEEP_RULES])
