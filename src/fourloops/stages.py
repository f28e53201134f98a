"""One function per workflow rule. Each takes paths and plain values (no Snakemake), writes its
outputs atomically, and returns the fields its provenance record needs."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np

from fourloops.camera import OrbitCamera
from fourloops.io import read_json, write_json


def camera_from(camera: dict, center) -> OrbitCamera:
    return OrbitCamera(
        distance_m=float(camera["distance_m"]),
        elevation_deg=float(camera["elevation_deg"]),
        focal_px=float(camera["focal_px"]),
        image_size=int(camera["image_size"]),
        target=tuple(float(c) for c in center),
    )


def check_card(device: str, limit_gib: float) -> None:
    """The busy-card guard before a GPU load (RFD 1140: on WDDM a job that does not fit pages, ~12x slower)."""
    if not str(device).startswith("cuda"):
        return
    from fourloops.guard import ensure_card_free

    index = int(device.split(":")[1]) if ":" in device else 0
    ensure_card_free(float(limit_gib), index)


# ------------------------------------------------------------------------------------------- render
def body_from(body: dict):
    from fourloops.body import DEFAULT_PHENOTYPE, DEFAULT_POSE, build_body

    return build_body({**DEFAULT_PHENOTYPE, **body.get("phenotype", {})}, {**DEFAULT_POSE, **body.get("pose", {})})


def render_stage(
    skeleton_out: str,
    images_out: list[str],
    keypoints_out: list[str],
    azimuths: list[int],
    body: dict,
    camera: dict,
    background,
) -> dict:
    """Build the body once; write its skeleton (3D COCO-17 joints, camera target) and render every
    azimuth with its ground-truth keypoints (pixels, COCO visibility)."""
    from fourloops.body import COCO17_NAMES
    from fourloops.io import save_image
    from fourloops.render import Renderer

    if not (len(images_out) == len(keypoints_out) == len(azimuths)):
        raise ValueError(f"{len(images_out)} images, {len(keypoints_out)} keypoint files, {len(azimuths)} azimuths")
    b = body_from(body)
    center = [float(c) for c in b.center]
    cam = camera_from(camera, center)
    with Renderer(cam.image_size) as renderer:
        for azimuth, image_out, points_out in zip(azimuths, images_out, keypoints_out):
            result = renderer.render(b, cam, float(azimuth), tuple(background))
            save_image(image_out, result.image)
            write_json(
                points_out,
                {
                    "image": str(image_out),
                    "image_size": [cam.image_size, cam.image_size],
                    "azimuth_deg": int(azimuth),
                    "names": list(COCO17_NAMES),
                    "keypoints": result.keypoints2d.tolist(),
                    "visibility": [int(v) for v in result.visibility],
                    "camera": {**camera, "target": center},
                },
            )
    write_json(
        skeleton_out,
        {
            "names": list(COCO17_NAMES),
            "keypoints3d": b.keypoints3d.tolist(),
            "center": center,
            "height_m": float(b.height_m),
            "vertices": int(len(b.vertices)),
            "faces": int(len(b.faces)),
        },
    )
    return {"renderer": "pyrender (EGL)", "body": {"vertices": int(len(b.vertices)), "height_m": float(b.height_m)}}


# ----------------------------------------------------------------------------------------- generate
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
    busy_card_limit_gib: float = 2.0,
) -> dict:
    """Every requested view of one condition from one model load.

    Views are staged in a hidden folder and moved into place only when all are done; the manifest,
    which the next stage depends on, is written last. A killed job leaves only the hidden folder.
    """
    from PIL import Image

    from fourloops import generate as gen
    from fourloops.io import save_image

    if lora:
        raise ValueError(f"condition {condition}: the camera LoRA rule does not exist yet")
    if len(images_out) != len(azimuths):
        raise ValueError(f"{len(images_out)} outputs for {len(azimuths)} azimuths")
    out_dir = Path(manifest_out).parent
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(STAGING_PREFIX + "*"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = out_dir / f"{STAGING_PREFIX}{os.getpid()}"
    staging.mkdir()

    size = int(generator["size"])
    refs = [Image.open(p).convert("RGB").resize((size, size), Image.Resampling.LANCZOS) for p in references]
    settings = {
        "num_inference_steps": int(generator["steps"]),
        "guidance": float(generator["guidance"]),
        "width": size,
        "height": size,
        "negative_prompt": generator["negative_prompt"],
    }
    check_card(generator["device"], busy_card_limit_gib)
    loads_before = gen.LOADS
    t0 = time.perf_counter()
    model = gen.load_backend(
        generator["backend"], generator["model"], generator["revision"], generator["precision"],
        generator["device"], settings,
    )
    load_seconds = time.perf_counter() - t0
    views = {}
    for azimuth, out in zip(azimuths, images_out):
        text = prompt.format(azimuth=azimuth)
        view_seed = int(seed) + int(azimuth)
        t1 = time.perf_counter()
        image = model.generate(refs, text, view_seed)
        seconds = time.perf_counter() - t1
        save_image(staging / Path(out).name, image)
        views[str(azimuth)] = {"image": str(out), "prompt": text, "seed": view_seed, "seconds": round(seconds, 4)}

    from fourloops.provenance import peak_vram_gib

    peak = peak_vram_gib()
    for out in images_out:
        os.replace(staging / Path(out).name, out)
    staging.rmdir()
    description = model.describe()
    write_json(
        manifest_out,
        {
            "condition": condition,
            "model_set": model_set,
            "generator": {k: generator[k] for k in ("backend", "model", "revision", "precision", "device")},
            "model": description,
            "model_loads": gen.LOADS - loads_before,
            "load_seconds": round(load_seconds, 4),
            "references": list(references),
            "reference_azimuths": list(reference_azimuths),
            "lora": bool(lora),
            "peak_vram_gib": peak,
            "views": views,
        },
    )
    return {
        "models": [description],
        "seed": int(seed),
        "precision": generator["precision"],
        "model_loads": gen.LOADS - loads_before,
    }


def smoke_generator_stage(backend: str, out_dir: str, seed: int) -> dict:
    from fourloops.smoke_generators import build_smoke_generator

    info = build_smoke_generator(backend, out_dir, int(seed))
    return {"seed": int(seed), "precision": "fp32", "smoke_model": info}


# ---------------------------------------------------------------------------------------- keypoints
# Random heads start at zero in RF-DETR (all 17 points on the box centre); a small spread gives the fit
# something to work on. 1 decoder layer and 10 queries keep the CPU cost ~0.5 s an image at 192 px.
SMOKE_DETECTOR_SHRINK = {"dec_layers": 1, "num_queries": 10, "head_init_std": 0.02}


def smoke_detector_stage(out_path: str, seed: int, resolution: int) -> dict:
    from fourloops.keypoints import build_smoke_detector

    info = build_smoke_detector(out_path, int(seed), resolution=int(resolution), **SMOKE_DETECTOR_SHRINK)
    return {"seed": int(seed), "precision": "fp32", "smoke_model": info}


def keypoints_stage(
    images: list[str], points_out: list[str], azimuths: list[int], detector: dict, busy_card_limit_gib: float = 2.0
) -> dict:
    """The most confident person's COCO-17 keypoints in every image of a set, one model load."""
    from PIL import Image

    from fourloops.keypoints import load_detector

    if not (len(images) == len(points_out) == len(azimuths)):
        raise ValueError(f"{len(images)} images, {len(points_out)} outputs, {len(azimuths)} azimuths")
    check_card(detector["device"], busy_card_limit_gib)
    det = load_detector(
        detector["weights"], device=detector["device"], resolution=int(detector["resolution"]),
        num_windows=int(detector["num_windows"]),
    )
    for azimuth, image, out in zip(azimuths, images, points_out):
        with Image.open(image) as im:
            record = det.detect(im.convert("RGB"))
        record.update(image=str(image), azimuth_requested=int(azimuth))
        write_json(out, record)
    return {"models": [det.describe()], "precision": "fp32"}


# ---------------------------------------------------------------------------------------------- fit
def fit_stage(
    points: list[str], skeleton: str, out: str, source: str, kind: str, azimuths: list[int], camera: dict, fit: dict
) -> dict:
    """Fit the azimuth of every view of one source (a condition, the renders, or their ground truth)."""
    from fourloops.fit import fit_azimuth

    if len(points) != len(azimuths):
        raise ValueError(f"{len(points)} keypoint files for {len(azimuths)} azimuths")
    skel = read_json(skeleton)
    cam = camera_from(camera, skel["center"])
    rows = []
    for azimuth, path in zip(azimuths, points):
        rec = read_json(path)
        kp = np.asarray(rec["keypoints"], dtype=float)
        # Keypoints are in the pixels of the image they came from; the camera is in render pixels.
        kp = kp * (cam.image_size / float(rec["image_size"][0]))
        if kind == "ground_truth":
            weights = (np.asarray(rec["visibility"]) > 0).astype(float)
            score = None
        else:
            weights = np.asarray(rec["keypoint_scores"], dtype=float)
            weights = np.where(weights >= float(fit["min_keypoint_score"]), weights, 0.0)
            score = rec.get("score")
        result = fit_azimuth(kp, weights, skel["keypoints3d"], cam, grid_step_deg=float(fit["grid_step_deg"]))
        row = result.as_dict()
        row.update(
            azimuth_requested=int(azimuth),
            detector_score=score,
            image=rec["image"],
            keypoints=str(path),
        )
        rows.append(row)
    write_json(out, {"source": source, "kind": kind, "rows": rows})
    return {"points_fitted": len(rows)}


# ------------------------------------------------------------------------------------------- ladder
def ladder_stage(fits: list[str], manifests: list[str], csv_out: str, png_out: str, model_set: str) -> dict:
    from fourloops import ladder

    rows = ladder.ladder_rows(fits, manifests, model_set)
    ladder.write_csv(rows, csv_out)
    floor_gt = [r["abs_error_deg"] for r in rows if r["condition"] == "floor_gt" and r["abs_error_deg"] != ""]
    title = f"fourloops ladder ({model_set} model set)"
    if floor_gt:
        title += f"; fit floor max |err| {max(floor_gt):.2f} deg"
    ladder.plot(rows, png_out, title)
    return {"model_set": model_set, "rows": len(rows)}


# -------------------------------------------------------------------------------------------- probe
def probe_stage(out: str, machine_name: str, component: str, generator: dict, detector: dict, model_set: str,
                busy_card_limit_gib: float) -> dict:
    """One pass of a configured model on this machine: load time, pass time, peak VRAM, with its apparatus.

    Later wall checks read the record (fourloops.asks.Measurements): measured beats estimated."""
    import torch
    from PIL import Image

    from fourloops import asks, provenance

    settings = generator if component == "generator" else detector
    device = settings["device"]
    check_card(device, busy_card_limit_gib)
    key = asks.generator_key(generator) if component == "generator" else asks.detector_key(detector)
    t0 = time.perf_counter()
    if component == "generator":
        from fourloops.generate import load_backend

        size = int(generator["size"])
        model = load_backend(generator["backend"], generator["model"], generator.get("revision"),
                             generator["precision"], device, {
                                 "num_inference_steps": 1, "guidance": generator["guidance"], "width": size,
                                 "height": size, "negative_prompt": generator.get("negative_prompt") or None})
        load_s = time.perf_counter() - t0
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()  # the peak from here on still counts the resident weights
        t1 = time.perf_counter()
        model.generate([Image.new("RGB", (size, size), "white")], "a person", seed=0)
    else:
        from fourloops.keypoints import load_detector

        res = int(detector["resolution"])
        model = load_detector(detector["weights"], device=device, resolution=res,
                              num_windows=int(detector["num_windows"]))
        load_s = time.perf_counter() - t0
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        t1 = time.perf_counter()
        model.detect(Image.new("RGB", (res, res), "white"))
    pass_s = time.perf_counter() - t1
    gpu = provenance.gpu_info()
    record = {
        "machine_name": machine_name,
        "component": component,
        "model_set": model_set,
        "key": key,
        "device": device,
        "load_seconds": round(load_s, 3),
        "pass_seconds": round(pass_s, 3),
        "peak_vram_gib": provenance.peak_vram_gib(),
        "gpu_name": ((gpu or {}).get("gpus") or [{}])[0].get("name"),
        "apparatus": {
            "machine": provenance.machine(),
            "gpu": gpu,
            "packages": provenance.package_versions(),
            "code": provenance.code_version(os.environ.get("FOURLOOPS_REPO")),
            "invocation": provenance.redact(os.environ.get("FOURLOOPS_INVOCATION", "")),
            "method": "torch.cuda.max_memory_allocated over one pass after the load (weights resident; "
                      "the CUDA context, ~0.5 GiB, is not in it)",
        },
    }
    write_json(out, record)
    return {"probe": {k: record[k] for k in ("key", "load_seconds", "pass_seconds", "peak_vram_gib")}}
