"""The hef_export stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.hef_export is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops.stage import Stage


def needs(params: dict) -> list:
    from fourloops.preflight import Need

    det = params.get("detector")
    out = [Need("package", "onnx", rule="hef_export"), Need("package", "onnxruntime", rule="hef_export")]
    return out + ([Need("checkpoint", det["weights"], rule="hef_export")] if det else [])


STAGE = Stage(name="hef_export", code="fourloops.stages.hef_export",
              rules=("hef_export", "hef_allowlist", "hef_calib"), profile="desk", needs=needs)
