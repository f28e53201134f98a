"""The smoke and sizing sets' stand-ins: a component's settings as the run uses it (rules/common.smk, the GPU
declarations). smoke: the tiny models the workflow builds, on the CPU; sizing: the configured models' random-weight
copies at the real shape (models/sizing/<build>); real: the config as written. Plain functions of the config,
testable without Snakemake."""

from __future__ import annotations

# The settings these return are a job's params, so a change shows there; the code is no part of any output.
LINEAGE = False

import os

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
    return det


def scorer(config: dict) -> dict:
    """The scorer as the run uses it: the configured base + adapter, or the smoke set's tiny pair (CPU, fp32)."""
    g = config["grades"]
    s = {"base": g["scorer"], "base_revision": g["scorer_revision"], "adapter": g["adapter"],
         "adapter_revision": g["adapter_revision"], "precision": g["precision"], "device": g["device"],
         "decoding": g["decoding"], "temperature": g["temperature"], "max_new_tokens": g["max_new_tokens"]}
    if config["model_set"] == "smoke":
        s.update(base=f"{SMOKE_SCORER_DIR}/base", base_revision=None, adapter=f"{SMOKE_SCORER_DIR}/adapter",
                 adapter_revision=None, precision="fp32", device="cpu",
                 max_new_tokens=config["smoke"]["scorer_max_new_tokens"])
    elif config["model_set"] == "sizing":
        s.update(base=sizing_model("scorer", "base"), base_revision=None, adapter=sizing_model("scorer", "adapter"),
                 adapter_revision=None)
    return s
