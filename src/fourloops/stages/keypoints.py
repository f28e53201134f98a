"""RF-DETR keypoints (COCO-17) on every image of a set, one model load per set (desk)."""

from __future__ import annotations

import time

from fourloops.card import check_card
from fourloops.io import write_json
from fourloops import model_sets
from fourloops.stage import AskContext, Build, Gpu, Knob, Stage


def keypoints_stage(
    images: list[str], points_out: list[str], azimuths: list[int], detector: dict, machine: str = "desk"
) -> dict:
    """The most confident person's COCO-17 keypoints in every image of a set, one model load."""
    from PIL import Image

    from fourloops.keypoints import load_detector

    if not (len(images) == len(points_out) == len(azimuths)):
        raise ValueError(f"{len(images)} images, {len(points_out)} outputs, {len(azimuths)} azimuths")
    check_card(detector["device"], machine)
    det = load_detector(
        detector["weights"], device=detector["device"], resolution=int(detector["resolution"]),
        num_windows=int(detector["num_windows"]),
    )
    seconds = []
    for azimuth, image, out in zip(azimuths, images, points_out):
        t0 = time.perf_counter()
        with Image.open(image) as im:
            record = det.detect(im.convert("RGB"))
        seconds.append(round(time.perf_counter() - t0, 4))
        record.update(image=str(image), azimuth_requested=int(azimuth))
        write_json(out, record)
    # where the job's seconds went (a forecast's parts: the load, then each image, the first with its warm-up)
    return {"models": [det.describe()], "precision": "fp32",
            "timing": {"load_seconds": round(det.load_seconds, 4), "image_seconds": seconds}}


# ------------------------------------------------------------------------------------ declaration
def ask(ctx: AskContext, wildcards: dict, params: dict):
    from fourloops import asks

    found = asks.detector_ask(ctx.facts, params["detector"], n_images=len(params["azimuths"]),
                              measured=ctx.measured, machine=ctx.machine)
    if params["detector"].get("ask_card"):  # smoke.ask_card: a card reserved, the tiny detector on the CPU
        from dataclasses import replace

        gib = float(ctx.facts.get("cuda_context_gib", 0.0))
        return replace(found, vram=asks.Figure(gib, f"smoke.ask_card: CUDA context {gib:g} GiB, nothing loaded on it"),
                       devices=("cuda",))
    return found


def detector_needs(det: dict, rule: str) -> list:
    from fourloops.preflight import Need

    return [Need("device", det["device"], rule=rule), Need("checkpoint", det["weights"], rule=rule)]


def needs(params: dict) -> list:
    return detector_needs(params["detector"], "keypoints")


def measures(record: dict) -> str | None:
    from fourloops.asks import detector_key

    det = (record.get("params") or {}).get("detector")
    return detector_key(det) if isinstance(det, dict) and "resolution" in det else None


def _detector_key(settings: dict) -> str:
    from fourloops.asks import detector_key

    return detector_key(settings)


def _detector_ask(facts: dict, settings: dict):
    from fourloops.asks import detector_ask

    return detector_ask(facts, settings, measured=None)


# The detector, declared once: the probe rule, the sizing set and the levers read it (fourloops.stage.Gpu).
DETECTOR = Gpu(
    name="detector", key=_detector_key, probe="fourloops.stages.probe:_probe_detector",
    settings=model_sets.detector, ask=_detector_ask, needs=detector_needs,
    knobs=(Knob((), "resolution", ("keypoints", "resolution"), "size"),),
    builds=(Build("detector", "rfdetr_keypoint_preview", "fp32"),), model_at="weights", precision=lambda s: "fp32",
    smoke_inputs=lambda config: model_sets.built_models(config, "detector"))

STAGE = Stage(name="keypoints", rules=("keypoints", "keypoints_generated", "keypoints_restyled"), profile="desk", ask=ask, needs=needs,
              measures=measures, knobs=DETECTOR.knobs_at(("detector",)), gpus=(DETECTOR,))
