"""The HEF chain's device half at the real shape, on the CPU: the sizing detector (RF-DETR KeypointPreview at its
real shape, random weights) at 576 px, num_windows 1, opset 17, through the product's own export (Identity nodes
folded), parity and census; compared with the graph RFD 1163's translate step cleared (825 nodes, 22 operator
types; device half 25,245,440 parameters, whole model 40,724,248).

    .venv/bin/python bench/hef_census.py --out bench/results/hef-census-576-cpu-2026-12-01.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

SEEDS_GRAPH = {"nodes": 825, "operator_types": 22, "device_half": 25_245_440, "whole_model": 40_724_248,
               "source": "RFD 1163 / RFD 1165 (the user's notes): the num_windows=1 export the DFC translated"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--resolution", type=int, default=576)
    ap.add_argument("--opset", type=int, default=17)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(2)
    from fourloops import hef, sizing
    from fourloops.keypoints import load_detector

    with tempfile.TemporaryDirectory(prefix="hef-census-") as tmp:
        t0 = time.perf_counter()
        sizing.build("detector", Path(tmp) / "detector", "cpu", texts=["-"])
        det = load_detector(str(Path(tmp) / "detector" / "rfdetr-keypoint.pth"), device="cpu",
                            resolution=args.resolution, num_windows=1)
        onnx_path = Path(tmp) / "device-half.onnx"
        t1 = time.perf_counter()
        exported = hef.export_device_half(det, onnx_path, opset=args.opset)
        t2 = time.perf_counter()
        par = hef.parity(det, onnx_path, n_inputs=2, seed=0, threshold=1e-3)
        census = hef.census(onnx_path)
        counts = hef.parameter_counts(det)
    record = {
        "what": "HEF device half at the real shape (sizing detector, CPU)", "export": exported,
        "census": {k: census[k] for k in ("nodes", "operator_types", "operators", "initializer_elements", "opset")},
        "parameters": counts, "parity_max_abs_diff": par["max_abs_diff"], "parity_runtime": par["runtime"],
        "seeds_graph": SEEDS_GRAPH,
        "matches_seeds": {"nodes": census["nodes"] == SEEDS_GRAPH["nodes"],
                          "operator_types": census["operator_types"] == SEEDS_GRAPH["operator_types"],
                          "device_half": counts["device_half"] == SEEDS_GRAPH["device_half"],
                          "whole_model": counts["whole_model"] == SEEDS_GRAPH["whole_model"]},
        "seconds": {"build_and_load": round(t1 - t0, 1), "export": round(t2 - t1, 1)},
        "torch": torch.__version__, "command": " ".join([sys.executable, *sys.argv]),
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"nodes {census['nodes']} (seeds {SEEDS_GRAPH['nodes']}), operator types {census['operator_types']} "
          f"(seeds {SEEDS_GRAPH['operator_types']}), Identity folded {exported['optimizer']['nodes_before']} -> "
          f"{exported['optimizer']['nodes_after']}, parity {par['max_abs_diff']:.2e}, parameters {counts}")
    return 0 if all(record["matches_seeds"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
