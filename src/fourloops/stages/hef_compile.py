"""The Dataflow Compiler in its container: ONNX -> HAR -> HEF for hef.hw_arch at hef.precision (RFD 1165).
Its walls are the recorded ones (39.87 GiB RAM, 32.5 GiB VRAM) and the licensed wheel: the desk's 24 GiB
card is refused before any job, the A40 pod fits."""

from __future__ import annotations


def compile_stage(onnx: str, allowlist: str, calib: str, hef_out: str, har_out: str, hef: dict, log=None) -> dict:
    from pathlib import Path

    from fourloops import dfc

    outside = Path(allowlist).read_text().strip()
    if outside:  # the DFC would refuse these after its own long run: refuse them first
        raise RuntimeError(f"{onnx} has operators outside hef.allowlist.{hef['hw_arch']} ({allowlist}): "
                           + "; ".join(outside.splitlines()) + "; nothing was compiled")

    info = dfc.compile_hef(onnx, calib, hef_out, har_out, name=hef["model"], hw_arch=hef["hw_arch"],
                           precision=hef["precision"], optimization_level=int(hef["optimization_level"]),
                           compression_level=int(hef["compression_level"]), calib_batch=int(hef["calib_batch"]),
                           wheel=hef.get("dfc_wheel"), log=log)
    # the name carries no precision (the gate): the precision lives here, in the provenance
    return {"precision": info["precision"], "hef": info}
