"""The CPU baseline the HEF is read against: the full-precision RF-DETR on the CPU at the same resolution,
median of N runs, the CPU named (RFD 1165: 2386.1 ms at 576); and the one latency table."""

from __future__ import annotations

import platform
import statistics
import time

from fourloops.io import read_json, write_json, write_text


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def baseline_stage(out: str, detector: dict, runs: int, threads: int) -> dict:
    import torch
    from PIL import Image

    from fourloops.keypoints import load_detector
    from fourloops.stages.hef_latency import export_key

    torch.set_num_threads(int(threads))
    res = int(detector["resolution"])
    det = load_detector(detector["weights"], device="cpu", resolution=res, num_windows=int(detector["num_windows"]))
    image = Image.new("RGB", (res, res), "white")
    det.detect(image)  # warm-up, not counted
    times = []
    for _ in range(int(runs)):
        t0 = time.perf_counter()
        det.detect(image)
        times.append((time.perf_counter() - t0) * 1000.0)
    desc = det.describe()
    record = {"row": "cpu", "where": f"CPU: {cpu_model()}, {torch.get_num_threads()} torch thread(s)",
              "model": desc["weights_sha256"][:16], "export": export_key({"resolution": res, "num_windows": det.num_windows}),
              "resolution": res, "precision": "fp32", "latency_ms": round(statistics.median(times), 3),
              "latency_kind": f"median wall of {int(runs)} detect() calls, whole model", "fps": None, "power_w": None,
              "runs": int(runs), "times_ms": [round(t, 3) for t in times]}
    write_json(out, record)
    return {"models": [desc], "precision": "fp32", "baseline": {k: record[k] for k in ("where", "latency_ms", "runs")}}


def table_stage(device: str, cpu: str, out: str) -> dict:
    from fourloops import hailort

    text = hailort.latency_table(read_json(device), read_json(cpu))
    write_text(out, text)
    return {}
