"""The HEF chain's desk half: the detector's device half as ONNX, its parity and census, the allowlist
check, the calibration frames, and the precision a Hailo target can run (RFD 1163, RFD 1165).

The device half is RF-DETR's own `export(backbone_only=True)`: the encoder and feature projectors, what
a Hailo part can run; the decoder and heads stay on the host. Nothing here imports the Dataflow
Compiler (fourloops.dfc does, inside the container).
"""

from __future__ import annotations

import collections
import copy
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from fourloops import io as fio

# RF-DETR's own input normalisation (rfdetr.datasets.transforms.Normalize): the ONNX input is normalised.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class PrecisionError(ValueError):
    """A precision mode or hw_arch the configured Hailo target cannot take."""


# --------------------------------------------------------------------------------- precision
def precision_table(machines_data: dict) -> tuple[str, dict]:
    """(container name, {hw_arch: {precisions, source}}) from config/machines.yaml's DFC container."""
    for name, raw in machines_data.items():
        if isinstance(raw, dict) and "hw_arch" in raw:
            return name, raw["hw_arch"]
    return "", {}


def precision_problem(hef: dict, machines_data: dict) -> str | None:
    """None when hef.precision is a mode hef.hw_arch runs, else the message: the mode, the ceiling, the source."""
    where, table = precision_table(machines_data)
    arch, mode = hef["hw_arch"], hef["precision"]
    if arch not in table:
        return (f"hef.hw_arch = {arch!r}: no precision table for it in config/machines.yaml ({where or 'no'} "
                f"container's hw_arch); allowed: one of {sorted(table)}")
    allowed = list(table[arch]["precisions"])
    if mode not in allowed:
        return (f"hef.precision = {mode!r}: {arch} cannot run it; allowed: one of {allowed} (ceiling {allowed[-1]}; "
                f"source: {table[arch]['source']})")
    return None


# ------------------------------------------------------------------------------------ export
def _device_half(det, shape: tuple[int, int]):
    """RF-DETR's own backbone-only graph (a copy; the loaded detector is untouched) and its example input."""
    from rfdetr.export.prepare import prepare_export_graph

    model = copy.deepcopy(det.rfdetr_model.model.model).cpu()
    return prepare_export_graph(model, det.rfdetr_model.model_config, shape=shape, device="cpu", backbone_only=True)


# The passes run over RF-DETR's export: torch's exporter leaves one Identity per parameter alias (176 at 576,
# num_windows 1); the graph RFD 1163's translate step cleared had none (825 nodes, 22 operator types).
OPTIMIZER_PASSES = ("eliminate_identity",)


def fold_identities(src: str | os.PathLike, dst: str | os.PathLike) -> dict:
    """`src` with its Identity nodes folded by onnxoptimizer (the ONNX project's own optimizer), saved to `dst`."""
    import importlib.metadata

    import onnx
    import onnxoptimizer

    model = onnx.load(str(src))
    before = len(model.graph.node)
    folded = onnxoptimizer.optimize(model, list(OPTIMIZER_PASSES))
    onnx.checker.check_model(folded)
    onnx.save(folded, str(dst))
    return {"optimizer": f"onnxoptimizer {importlib.metadata.version('onnxoptimizer')}",
            "passes": list(OPTIMIZER_PASSES), "nodes_before": before, "nodes_after": len(folded.graph.node)}


def export_device_half(det, out_onnx: str | os.PathLike, *, opset: int) -> dict:
    """The device half at the detector's resolution and num_windows, by RF-DETR's own ONNX export with its
    Identity nodes folded (`fold_identities`), written atomically to `out_onnx`."""
    import torch

    side = det.resolution
    out = Path(out_onnx)
    with tempfile.TemporaryDirectory(prefix=".export-", dir=out.parent) as tmp:
        with torch.no_grad():
            written = det.rfdetr_model.export(output_dir=tmp, backbone_only=True, opset_version=int(opset),
                                              verbose=False, shape=(side, side), batch_size=1)
        with fio.atomic_path(out) as part:
            passes = fold_identities(written, part)
    return {"resolution": side, "num_windows": det.num_windows, "opset": int(opset), "batch": 1,
            "exporter": "rfdetr RFDETR.export(format='onnx', backbone_only=True)", "optimizer": passes}


def fixed_inputs(n: int, side: int, seed: int):
    """`n` inputs of shape (1, 3, side, side), the same for the same seed: normalised-image-like N(0, 1)."""
    import torch

    gen = torch.Generator().manual_seed(int(seed))
    return [torch.randn(1, 3, side, side, generator=gen) for _ in range(int(n))]


def parity(det, onnx_path: str | os.PathLike, *, n_inputs: int, seed: int, threshold: float) -> dict:
    """max |onnxruntime - torch| over every output of the device half on fixed inputs; ParityError above threshold."""
    import numpy as np
    import onnxruntime as ort
    import torch

    side = det.resolution
    graph = _device_half(det, (side, side))
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    worst, per_output = 0.0, {}
    with torch.no_grad():
        for x in fixed_inputs(n_inputs, side, seed):
            ref = [t.numpy() for t in graph.model(x)]
            got = session.run(None, {name: x.numpy()})
            for out_name, a, b in zip(graph.output_names, ref, got):
                if a.shape != b.shape:
                    raise ParityError(f"{onnx_path}: output {out_name} is {b.shape} in onnxruntime, {a.shape} in torch")
                diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
                per_output[out_name] = max(per_output.get(out_name, 0.0), diff)
                worst = max(worst, diff)
    result = {"max_abs_diff": worst, "per_output": per_output, "inputs": int(n_inputs), "seed": int(seed),
              "threshold": float(threshold), "runtime": f"onnxruntime {ort.__version__} CPUExecutionProvider"}
    if not worst <= threshold:  # NaN fails too
        raise ParityError(f"{onnx_path}: max |onnxruntime - torch| = {worst:.3e} over {n_inputs} fixed input(s) is "
                          f"above hef.parity_max_abs_diff = {threshold:g}; the export does not compute the model")
    return result


class ParityError(RuntimeError):
    pass


# ------------------------------------------------------------------------------------ census
def census(onnx_path: str | os.PathLike) -> dict:
    """Node count, operator types with counts and the initializer elements of an ONNX graph, counted."""
    import numpy as np
    import onnx

    model = onnx.load(str(onnx_path))
    ops = collections.Counter(node.op_type for node in model.graph.node)
    return {
        "nodes": len(model.graph.node),
        "operators": dict(sorted(ops.items())),
        "operator_types": len(ops),
        "initializer_elements": int(sum(int(np.prod(t.dims)) for t in model.graph.initializer)),
        "opset": [{"domain": o.domain or "ai.onnx", "version": int(o.version)} for o in model.opset_import],
        "inputs": [{"name": i.name, "shape": [d.dim_value for d in i.type.tensor_type.shape.dim]}
                   for i in model.graph.input],
        "outputs": [o.name for o in model.graph.output],
    }


def parameter_counts(det) -> dict:
    """Parameters of the device half (the exported backbone module) and of the whole model, counted."""
    backbone = det.rfdetr_model.model.model.backbone[0]
    return {"device_half": int(sum(p.numel() for p in backbone.parameters())), "whole_model": det.parameter_count()}


# --------------------------------------------------------------------------------- allowlist
def outside_allowlist(operators: dict[str, int], allowlist: list[str]) -> dict[str, int]:
    """Operator type -> count for every operator of the graph that the allowlist does not name."""
    allowed = set(allowlist)
    return {op: int(n) for op, n in sorted(operators.items()) if op not in allowed}


def allowlist_text(outside: dict[str, int], hw_arch: str) -> str:
    """The allowlist file: one `<operator> <count>` line per operator outside the list; empty is the good answer."""
    return "".join(f"{op} {n}\n" for op, n in outside.items())


# ------------------------------------------------------------------------------------- calib
def calib_frames(images: list[str], side: int, n: int) -> Any:
    """`n` frames (N, side, side, 3) float32 in the ONNX input's normalisation, from the renders cycled in
    order: the NHWC layout the DFC's optimize() takes."""
    import numpy as np
    from PIL import Image

    if not images:
        raise ValueError("calibration frames need at least one render")
    mean = np.asarray(IMAGENET_MEAN, dtype=np.float32)
    std = np.asarray(IMAGENET_STD, dtype=np.float32)
    base = []
    for path in images:
        with Image.open(path) as im:
            rgb = im.convert("RGB").resize((side, side), Image.BILINEAR)
        base.append((np.asarray(rgb, dtype=np.float32) / 255.0 - mean) / std)
    return np.stack([base[i % len(base)] for i in range(int(n))]).astype(np.float32)
