"""The smoke and sizing sets' stand-ins: a component's settings as the run uses it (rules/common.smk, the GPU
declarations). smoke: the tiny models the workflow builds, on the CPU; sizing: the configured models' random-weight
copies at the real shape (models/sizing/<build>); real: the config as written. Plain functions of the config,
testable without Snakemake."""

from __future__ import annotations

# The settings these return are a job's params, so a change shows there; the code is no part of any output.
LINEAGE = False

import functools
import os
import sys
from pathlib import Path

SMOKE_GENERATOR_DIR = "models/smoke/generator-{backend}"
SMOKE_DETECTOR = "models/smoke/rfdetr-keypoint.pth"
SMOKE_SCORER_DIR = "models/smoke/scorer"
SIZING_DIR = "models/sizing/{component}"  # fourloops.sizing.build writes each one; the real loaders read it


def sizing_model(component: str, inner: str = "") -> str:
    return os.path.join(SIZING_DIR.format(component=component), inner) if inner else SIZING_DIR.format(component=component)


def generator(config: dict) -> dict:
    """The generator as the run uses it: the configured one, or its smoke stand-in."""
    gen = dict(config["generator"])
    if config["model_set"] == "smoke":
        backend = config["smoke"]["generator_backend"]
        gen.update(backend=backend, model=SMOKE_GENERATOR_DIR.format(backend=backend), revision=None, precision="fp32",
                   device="cpu", steps=config["smoke"]["generator_steps"], size=config["smoke"]["generator_size"])
    elif config["model_set"] == "sizing":  # the configured generator, its random-weight copy at the real shape
        gen.update(model=sizing_model(gen["backend"]), revision=None)
    return gen


def detector(config: dict) -> dict:
    det = dict(config["keypoints"])
    if config["model_set"] == "smoke":
        det.update(weights=SMOKE_DETECTOR, device="cpu", resolution=config["smoke"]["keypoints_resolution"])
        if config["smoke"]["ask_card"]:
            det["ask_card"] = True
    elif config["model_set"] == "sizing":
        det["weights"] = sizing_model("detector", "rfdetr-keypoint.pth")
    else:
        det["weights"] = os.path.expanduser(det["weights"])
        # the user's checkpoint is no job's output, so the output check leaves its bytes alone: they go in the
        # params instead, and another checkpoint at the same path makes the jobs that read it stale
        det["weights_sha256"] = checkpoint_sha256(det["weights"])
    return det


# sha256 by path and stat, across working directories: a user's checkpoint file and local weight directories
LOCAL_WEIGHT_HASHES = "~/.cache/fourloops/checkpoints.json"


def checkpoint_sha256(path: str) -> str | None:
    """The file's sha256, read once per (path, size, mtime, ctime, inode) and kept in LOCAL_WEIGHT_HASHES (every
    Snakemake process of a run parses the workflow, and each parse asks once per rule); None when there is no file
    to read there (none, a directory, an unreadable one: the preflight names it)."""
    try:
        if not os.path.isfile(path):
            return None
        path = os.path.abspath(path)
        return _sha256s(path, _states([path]))[0]
    except OSError:
        return None


def _states(paths: list[str]) -> tuple[tuple, ...]:
    """(path, size, mtime, ctime, inode) per file: what HashCache keys a digest by, and this process's cache key."""
    return tuple((p, (st := os.stat(p)).st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) for p in paths)


@functools.cache
def _sha256s(where: str, states: tuple[tuple, ...]) -> tuple[str, ...]:
    """Each file's sha256: one cache file read per set of file states in a process, and a file read only when
    HashCache has not seen it in that state. `where` names them in the one line said before files are read (a
    first parse over tens of GiB takes a while)."""
    from fourloops.verify import HashCache

    cache = HashCache(os.path.expanduser(LOCAL_WEIGHT_HASHES))
    stats = [os.stat(path) for path, *_ in states]
    unseen = [st.st_size for (path, *_), st in zip(states, stats) if not cache.known(path, st)]
    if unseen:
        print(f"fourloops: reading the sha256 of {len(unseen)} of the {len(states)} file(s) of {where} "
              f"({sum(unseen) / 2**30:.2f} GiB), once: kept by path and stat in {LOCAL_WEIGHT_HASHES}",
              file=sys.stderr, flush=True)
    digests = tuple(cache.sha256(path, Path(path), st) for (path, *_), st in zip(states, stats))
    cache.save()
    return digests


def local_dir_sha256(root: str) -> str | None:
    """A local weight directory's digest: sha256 over (relative path, size, sha256) of every non-hidden file, sorted,
    each file read once per state (LOCAL_WEIGHT_HASHES). It is the figure a generate or grades job records as its
    `local_dir_sha256` revision (fourloops.hub.local_dir_digest), except that it also reads the files under a
    symlinked subdirectory, which the record's walk does not enter (unchanged there: hub.py's bytes are in the jobs'
    lineage), so weights swapped behind such a link stale the jobs too. None when there is no directory to read (the
    preflight names it)."""
    import hashlib

    base = Path(os.path.expanduser(root))
    if not base.is_dir():
        return None
    try:
        files, seen = [], set()
        for top, dirs, names in os.walk(base, followlinks=True):
            real = os.path.realpath(top)
            if real in seen:  # a link back up the tree: its files are listed once
                dirs[:] = []
                continue
            seen.add(real)
            dirs[:] = [d for d in dirs if not d.startswith(".")]  # hidden: a download's lock and metadata
            files += [Path(top, n) for n in names if not n.startswith(".") and os.path.isfile(os.path.join(top, n))]
        files.sort()  # in hub.local_dir_digest's order: Path's, not the strings'
        states = _states([os.path.abspath(f) for f in files])
        digest = hashlib.sha256()
        for f, state, sha in zip(files, states, _sha256s(str(base), states)):
            digest.update(f"{f.relative_to(base).as_posix()}\t{state[1]}\t{sha}\n".encode())
    except OSError:  # an unreadable file: the preflight's own read of the directory names it
        return None
    return digest.hexdigest()


def is_local(model: str) -> bool:
    """The loaders' own rule (fourloops.hub.resolve_model): an existing path, or a name shaped like one, is a local
    directory; anything else is a hub id (private, and not renamed: hub.py's bytes are in the jobs' lineage)."""
    from fourloops.hub import _looks_like_path

    return Path(model).expanduser().exists() or _looks_like_path(model)


LOCAL_WEIGHT_KEYS = {"generator": "generator.model", "scorer": "grades.scorer", "adapter": "grades.adapter"}


def local_weights(config: dict, component: str) -> dict:
    """A param for the rules whose jobs load `component` (generator: generate, restyle and the LoRA's two jobs;
    scorer: grades): on the real set, each local weight directory they load with its digest, so other weights put at
    the same path make those jobs stale, as a new hub revision does through the params. {} for hub ids (their
    pinned commit is in the params) and on the smoke and sizing sets (their models are jobs' outputs, which the
    output check covers): a rule's params gain nothing there, and no job of theirs reruns."""
    if config["model_set"] != "real":
        return {}
    if component == "generator":
        dirs = {"generator": generator(config)["model"]}
    elif component == "scorer":
        s = scorer(config)
        dirs = {"scorer": s["base"], "adapter": s["adapter"]}
    else:
        raise ValueError(f"component = {component!r}; allowed: generator, scorer")
    found = {name: {"path": os.path.expanduser(model), "sha256": local_dir_sha256(model)}
             for name, model in dirs.items() if is_local(model)}
    return {"local_weights": found} if found else {}


def scorer(config: dict) -> dict:
    """The scorer as the run uses it: the configured base + adapter, or the smoke set's tiny pair (CPU, fp32)."""
    g = config["grades"]
    s = {"base": g["scorer"], "base_revision": g["scorer_revision"], "adapter": g["adapter"],
         "adapter_revision": g["adapter_revision"], "precision": g["precision"], "device": g["device"],
         "decoding": g["decoding"], "temperature": g["temperature"], "max_new_tokens": g["max_new_tokens"],
         "batch": g.get("batch", 1)}  # views a call: `auto` or a number, resolved by the job's ask (1: the default)
    if config["model_set"] == "smoke":
        s.update(base=f"{SMOKE_SCORER_DIR}/base", base_revision=None, adapter=f"{SMOKE_SCORER_DIR}/adapter",
                 adapter_revision=None, precision="fp32", device="cpu",
                 max_new_tokens=config["smoke"]["scorer_max_new_tokens"])
    elif config["model_set"] == "sizing":
        s.update(base=sizing_model("scorer", "base"), base_revision=None, adapter=sizing_model("scorer", "adapter"),
                 adapter_revision=None)
    return s


def built_models(config: dict, component: str, sets: tuple[str, ...] = ("smoke", "sizing")) -> dict:
    """The models of the smoke or sizing set a job loading `component` reads, as its inputs (the workflow builds
    them: rules/models.smk, rules/sizing.smk); {} on the real set, whose weights live in the HF cache (the
    preflight checks them), and for a set not in `sets`."""
    model_set = config["model_set"]
    if model_set not in sets or model_set not in ("smoke", "sizing"):
        return {}
    if component == "generator":
        return {"model": generator(config)["model"]}
    if component == "detector":
        return {"weights": SMOKE_DETECTOR if model_set == "smoke" else sizing_model("detector")}
    if component == "scorer":
        return {"model": SMOKE_SCORER_DIR if model_set == "smoke" else sizing_model("scorer")}
    raise ValueError(f"component = {component!r}; allowed: generator, detector, scorer")


def lora_records(config: dict) -> dict:
    """The LoRA's training records: the configured ones, or the smoke set's few."""
    rec = dict(config["lora"]["records"])
    if config["model_set"] == "smoke":
        rec.update(count=config["lora"]["smoke"]["count"], azimuths=config["lora"]["smoke"]["azimuths"])
    return rec


def lora_generator(config: dict) -> dict:
    """What the LoRA jobs take of the generator: which model, from where (not its sampling settings)."""
    gen = generator(config)
    device = "cpu" if config["model_set"] == "smoke" else config["lora"]["device"]
    return {"backend": gen["backend"], "model": gen["model"], "revision": gen["revision"], "device": device}


def lora_text_encoder_dtype(config: dict) -> str:
    return "fp32" if config["model_set"] == "smoke" else "bf16"


def lora_embeddings(config: dict) -> dict:
    """What the instruction embeddings job loads and how it encodes: the generator's text encoder, its dtype, the
    pipelines' max_sequence_length."""
    return {**lora_generator(config), "text_encoder_dtype": lora_text_encoder_dtype(config), "max_sequence_length": 1024}


TRAIN_KEYS = ("rank", "alpha", "dropout", "target_modules", "steps", "lr", "weight_decay", "max_grad_norm",
              "resolution", "accumulation", "micro_batch", "frozen_dtype", "text_encoder", "seed")


def lora_train(config: dict) -> dict:
    """The LoRA training job's settings: the configured ones, or the tiny generator's on the CPU at its own size,
    fp32 like the smoke generator."""
    lora = config["lora"]
    train = {**lora_generator(config), "model_set": config["model_set"], **{k: lora[k] for k in TRAIN_KEYS}}
    if config["model_set"] == "smoke":
        train.update(steps=lora["smoke"]["steps"], accumulation=lora["smoke"]["accumulation"], lr=lora["smoke"]["lr"],
                     resolution=config["smoke"]["generator_size"], frozen_dtype="fp32")
    return train
