"""The keypoints stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.keypoints is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops import batching, model_sets
from fourloops.stage import AskContext, Build, Gpu, Knob, Stage


def ask(ctx: AskContext, wildcards: dict, params: dict):
    from fourloops import asks, batching

    det, n = params["detector"], len(params["azimuths"])
    found = batching.choose(lambda b: asks.detector_ask(ctx.facts, det, n_images=n, batch=b, measured=ctx.measured,
                                                        machine=ctx.machine),
                            det.get("batch", 1), most=n, limit_gib=batching.card_gib(ctx.machine, ctx.provided_vram_mb),
                            key="keypoints.batch")
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


def _detector_ask(facts: dict, settings: dict, batch: int = 1):
    from fourloops.asks import detector_ask

    return detector_ask(facts, settings, batch=batch, measured=None)


# The detector, declared once: the probe rule, the sizing set and the levers read it (fourloops.stage.Gpu).
DETECTOR = Gpu(
    name="detector", key=_detector_key, probe="fourloops.stages.probe:_probe_detector",
    settings=model_sets.detector, ask=_detector_ask, needs=detector_needs, batch_most=lambda s: batching.MOST,
    knobs=(Knob((), "resolution", ("keypoints", "resolution"), "size"), Knob((), "batch", ("keypoints", "batch"), "batch")),
    builds=(Build("detector", "rfdetr_keypoint_preview", "fp32"),), model_at="weights", precision=lambda s: "fp32",
    smoke_inputs=lambda config: model_sets.built_models(config, "detector"))

STAGE = Stage(name="keypoints", code="fourloops.stages.keypoints",
              rules=("keypoints", "keypoints_generated", "keypoints_restyled"), profile="desk", ask=ask, needs=needs,
              measures=measures, knobs=DETECTOR.knobs_at(("detector",)), gpus=(DETECTOR,), batch_changes_bytes=True)
