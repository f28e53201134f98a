"""Measured beats estimated: one pass per configured model on the machine this runs on; its peak VRAM
and load time replace the models.yaml estimate in later wall checks (fourloops.asks.Measurements)."""

from __future__ import annotations

import os
import time

from fourloops.card import check_card
from fourloops.io import write_json
from fourloops.stage import AskContext, Stage
from fourloops.stages.generate import generator_needs
from fourloops.stages.keypoints import detector_needs


def probe_stage(out: str, machine_name: str, component: str, generator: dict, detector: dict, model_set: str,
                machine: str = "desk") -> dict:
    """One pass of a configured model on this machine: load time, pass time, peak VRAM, with its apparatus.

    Later wall checks read the record (fourloops.asks.Measurements): measured beats estimated."""
    import torch
    from PIL import Image

    from fourloops import asks, provenance

    settings = generator if component == "generator" else detector
    device = settings["device"]
    check_card(device, machine)
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


# ------------------------------------------------------------------------------------ declaration
def ask(ctx: AskContext, wildcards: dict, params: dict):
    from fourloops import asks

    if params["model_set"] == "smoke":  # the tiny models on the CPU
        return asks.stage_ask(ctx.facts, "smoke_generate")
    if wildcards["component"] == "generator":
        return asks.generator_ask(ctx.facts, params["generator"], measured=None)
    return asks.detector_ask(ctx.facts, params["detector"], measured=None)


def needs(params: dict) -> list:
    return generator_needs(params["generator"], "probe_model") + detector_needs(params["detector"], "probe_model")


STAGE = Stage(name="probe", rules=("probe_model",), profile="desk", ask=ask, needs=needs)
