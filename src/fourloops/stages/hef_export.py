"""The HEF chain on the desk: the device half as ONNX (parity, census), the allowlist check, the
calibration frames (RFD 1163). No Dataflow Compiler needed; with it installed, its own translate too."""

from __future__ import annotations

import importlib.util

from fourloops.io import read_json, write_json, write_text


def _detector(detector: dict):
    from fourloops.keypoints import load_detector

    # RF-DETR traces its exports on the CPU; the detector's own device is not needed here
    return load_detector(detector["weights"], device="cpu", resolution=int(detector["resolution"]),
                         num_windows=int(detector["num_windows"]))


def export_stage(onnx_out: str, record_out: str, detector: dict, hef: dict) -> dict:
    """The device half at the configured resolution and num_windows, its parity against torch, its census."""
    import torch

    from fourloops import hef as h

    torch.manual_seed(0)
    det = _detector(detector)
    exported = h.export_device_half(det, onnx_out, opset=int(hef["opset"]))
    par = h.parity(det, onnx_out, n_inputs=int(hef["parity_inputs"]), seed=int(hef["parity_seed"]),
                   threshold=float(hef["parity_max_abs_diff"]))
    record = {"model": hef["model"], "export": exported, "parity": par, "census": h.census(onnx_out),
              "parameters": h.parameter_counts(det), "detector": det.describe()}
    write_json(record_out, record)
    return {"models": [det.describe()], "precision": "fp32",
            "hef_export": {k: record[k] for k in ("export", "parity", "parameters")}}


def allowlist_stage(export_record: str, onnx: str, out: str, hef: dict) -> dict:
    """Operators outside the configured allowlist for hef.hw_arch (empty is the good answer); with the DFC
    installed here, its own translate step as well."""
    from fourloops import hef as h

    arch = hef["hw_arch"]
    allowlist = (hef["allowlist"] or {}).get(arch)
    if allowlist is None:
        raise ValueError(f"hef.allowlist has no list for hef.hw_arch = {arch!r}; allowed: one of {sorted(hef['allowlist'])}")
    census = read_json(export_record)["census"]
    outside = h.outside_allowlist(census["operators"], allowlist)
    if importlib.util.find_spec("hailo_sdk_client") is not None:
        from fourloops import dfc

        translate = dfc.translate_check(onnx, name=hef["model"], hw_arch=arch, sdk=dfc.load_sdk(hef.get("dfc_wheel")))
    else:
        translate = {"ran": False, "why": "hailo_sdk_client is not installed here (the DFC runs in the container)"}
    write_text(out, h.allowlist_text(outside, arch))
    if translate.get("ran") and not translate["ok"]:
        raise RuntimeError(f"the DFC's translate of {onnx} for {arch} failed: {translate['error']}")
    return {"allowlist": {"hw_arch": arch, "outside": outside, "operators_checked": len(census["operators"]),
                          "dfc_translate": translate}}


def calib_stage(images: list[str], out: str, export_record: str, hef: dict) -> dict:
    """N frames from the renders, in the layout and dtype the DFC's optimize() takes."""
    import numpy as np

    from fourloops import hef as h
    from fourloops.io import atomic_path

    side = int(read_json(export_record)["export"]["resolution"])
    frames = h.calib_frames(list(images), side, int(hef["calib_frames"]))
    with atomic_path(out) as tmp, open(tmp, "wb") as fh:
        np.save(fh, frames)
    return {"calib": {"frames": int(frames.shape[0]), "distinct_renders": len(images), "shape": list(frames.shape),
                      "layout": "NHWC", "dtype": str(frames.dtype),
                      "normalisation": {"mean": list(h.IMAGENET_MEAN), "std": list(h.IMAGENET_STD),
                                        "of": "RGB / 255 (RF-DETR's own Normalize)"},
                      "order": "the renders in azimuth order, cycled"}}
