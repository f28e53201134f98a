"""New views per ladder condition: one job loads the generator once and makes every azimuth (pod)."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from fourloops import determinism
from fourloops.card import check_card
from fourloops.io import write_json

STAGING_PREFIX = ".views-partial-"


def generate_stage(
    references: list[str],
    images_out: list[str],
    manifest_out: str,
    condition: str,
    prompt: str,
    lora: bool,
    azimuths: list[int],
    seed: int,
    model_set: str,
    generator: dict,
    reference_azimuths: list[int],
    machine: str = "desk",
    lora_path: str | None = None,
    batch: int = 1,
) -> dict:
    """Every requested view of one condition from one model load (`views_from_one_load`), `batch` views a call.

    A condition with `lora: true` gets the camera LoRA file as its job's input `lora` (`lora_path`
    here): the generator loads it over the base model. A condition without it has no such input."""
    determinism.apply(seed)
    if lora and lora_path is None:
        raise ValueError(
            f"condition {condition}: lora = true, but the generate job has no input `lora` (the camera LoRA "
            "file, results/lora/<name>.safetensors, from the LoRA training rule); nothing was generated"
        )
    if not lora and lora_path is not None:
        raise ValueError(
            f"condition {condition}: lora = false, but the generate job was given the LoRA file {lora_path!r}; "
            "a condition loads the LoRA only with lora: true"
        )
    if len(images_out) != len(azimuths):
        raise ValueError(f"{len(images_out)} outputs for {len(azimuths)} azimuths")
    views = [View(str(a), out, list(references), prompt.format(azimuth=a), int(seed) + int(a))
             for a, out in zip(azimuths, images_out)]
    head = {"condition": condition, "model_set": model_set}
    tail = {"references": list(references), "reference_azimuths": list(reference_azimuths), "lora": bool(lora)}
    return views_from_one_load(views, manifest_out, generator, machine, head, tail, seed=int(seed), batch=batch,
                               lora=lora_path) | {"seed": int(seed)}


@dataclass(frozen=True)
class View:
    key: str  # the manifest's key for the view (the azimuth)
    out: str
    references: list[str]
    prompt: str
    seed: int


def views_from_one_load(views: list[View], manifest_out: str, generator: dict, machine: str, head: dict,
                        tail: dict, seed: int, batch: int = 1, lora: str | None = None) -> dict:
    """One generator load makes every view (generate, restyle), with the LoRA file `lora` when given, `batch` views
    a pipeline call (the job's `batch` resource, fourloops.batching; at most what the backend takes); `seed` is the
    job's (each view has its own besides).

    Views are staged in a hidden folder and moved into place only when all are done; the manifest,
    which the next stage depends on, is written last. A killed job leaves only the hidden folder.
    Returns the provenance fields (models, precision, model_loads).
    """
    from PIL import Image

    from fourloops import generate as gen
    from fourloops import loading
    from fourloops.io import save_image

    out_dir = Path(manifest_out).parent
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(STAGING_PREFIX + "*"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = out_dir / f"{STAGING_PREFIX}{os.getpid()}"
    staging.mkdir()

    size = int(generator["size"])
    loaded: dict[str, object] = {}

    def reference(path: str):
        if path not in loaded:
            loaded[path] = Image.open(path).convert("RGB").resize((size, size), Image.Resampling.LANCZOS)
        return loaded[path]

    settings = {
        "num_inference_steps": int(generator["steps"]),
        "guidance": float(generator["guidance"]),
        "width": size,
        "height": size,
        "negative_prompt": generator["negative_prompt"],
    }
    check_card(generator["device"], machine)
    loads_before = loading.LOADS
    t0 = time.perf_counter()
    model = gen.load_backend(
        generator["backend"], generator["model"], generator["revision"], generator["precision"],
        generator["device"], settings, lora=lora,
    )
    load_seconds = time.perf_counter() - t0
    per_call = max(1, min(int(batch), model.max_batch()))
    pad_to = model.text_length([v.prompt for v in views])  # every call's prompts padded alike, whatever the batch
    made = {}
    for start in range(0, len(views), per_call):
        chunk = views[start:start + per_call]
        t1 = time.perf_counter()
        images = model.generate_batch([([reference(p) for p in v.references], v.prompt, v.seed) for v in chunk],
                                      job_seed=seed, pad_to=pad_to)
        seconds = (time.perf_counter() - t1) / len(chunk)  # a view's share of its call
        for view, image in zip(chunk, images):
            save_image(staging / Path(view.out).name, image)
            made[view.key] = {"image": str(view.out), "prompt": view.prompt, "seed": view.seed,
                              "seconds": round(seconds, 4)}

    from fourloops.provenance import peak_vram_gib

    peak = peak_vram_gib()
    for view in views:
        os.replace(staging / Path(view.out).name, view.out)
    staging.rmdir()
    description = model.describe()
    write_json(
        manifest_out,
        {
            **head,
            "generator": {k: generator[k] for k in ("backend", "model", "revision", "precision", "device")},
            "model": description,
            "model_loads": loading.LOADS - loads_before,
            "load_seconds": round(load_seconds, 4),
            **tail,
            "peak_vram_gib": peak,
            "views": made,
        },
    )
    return {
        "models": [description],
        "precision": generator["precision"],
        "model_loads": loading.LOADS - loads_before,
        # where the job's seconds went, in the order the views were made (a forecast's parts: the load, then each
        # view, the first with its warm-up)
        "timing": {"load_seconds": round(load_seconds, 4), "view_seconds": [made[v.key]["seconds"] for v in views],
                   "batch": per_call},
    }
