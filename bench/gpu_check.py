"""CUDA paths the CPU tests cannot reach, run on a machine with an NVIDIA GPU.

    PYTHONPATH=src python bench/gpu_check.py [--out gpu_check.json]

1. The smoke generator loaded on CUDA in bf16 and in nf4 (bitsandbytes) through the same
   `fourloops.generate.load_backend` path the real weights take; views from 1 and 3 references;
   peak VRAM by torch and memory in use by NVML; same seed twice gives the same image.
2. The provenance record's GPU fields (NVML: name, driver, memory).
3. The busy-card guard for real: another process holds 3 GiB, then `python -m fourloops.guard
   --limit-gib 2` must refuse (exit 3) and say who holds the memory, within 5 s; after the holder
   exits it must pass.
Prints one JSON document (also written to --out).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOLDER = """
import sys, time, torch
x = torch.empty(int(3 * 2**30), dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("holding", x.numel() / 2**30, "GiB", flush=True)
sys.stdout.flush()
time.sleep(float(sys.argv[1]))
"""


def generator_checks(tmp: Path) -> dict:
    import torch
    from PIL import Image

    from fourloops import generate as gen
    from fourloops import loading
    from fourloops.provenance import gpu_info
    from fourloops.smoke_generators import build_smoke_generator

    model_dir = tmp / "smoke-qwen"
    build_smoke_generator("qwen_image_edit_plus", str(model_dir), 7)
    refs = [Image.new("RGB", (128, 128), (255, 255 - 60 * i, 200)) for i in range(3)]
    settings = {"num_inference_steps": 2, "guidance": 4.0, "width": 128, "height": 128, "negative_prompt": ""}
    out = {}
    for precision in ("bf16", "nf4"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        try:
            model = gen.load_backend("qwen_image_edit_plus", str(model_dir), None, precision, "cuda", settings)
        except Exception as err:  # report, do not hide: the note says what failed
            out[precision] = {"error": f"{type(err).__name__}: {err}"}
            continue
        load_s = time.perf_counter() - t0
        views = {}
        for n in (1, 3):
            t1 = time.perf_counter()
            a = model.generate(refs[:n], "the same person, camera orbited to 90 degrees", 1234)
            torch.cuda.synchronize()
            secs = time.perf_counter() - t1
            b = model.generate(refs[:n], "the same person, camera orbited to 90 degrees", 1234)
            views[f"{n}_refs"] = {
                "seconds": round(secs, 3),
                "same_seed_same_bytes": a.tobytes() == b.tobytes(),
                "sha256": hashlib.sha256(a.tobytes()).hexdigest()[:16],
            }
        desc = model.describe()
        out[precision] = {
            "load_seconds": round(load_s, 3),
            "peak_vram_gib_torch": torch.cuda.max_memory_allocated() / 2**30,
            "pipeline_class": desc.get("pipeline_class"),
            "parameters": desc.get("parameters"),
            "views": views,
        }
        del model
    out["gpu_info"] = gpu_info()
    out["loads_counted"] = loading.LOADS
    return out


def guard_checks() -> dict:
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "fourloops.guard", "--limit-gib", "2"]
    t0 = time.perf_counter()
    free = subprocess.run(cmd, capture_output=True, text=True, env=env)
    free_s = time.perf_counter() - t0
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "60"], stdout=subprocess.PIPE, text=True, env=env)
    line = holder.stdout.readline().strip()
    t1 = time.perf_counter()
    busy = subprocess.run(cmd, capture_output=True, text=True, env=env)
    busy_s = time.perf_counter() - t1
    holder.kill()
    holder.wait()
    time.sleep(2.0)
    after = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return {
        "holder": line,
        "holder_pid": holder.pid,
        "before": {"rc": free.returncode, "seconds": round(free_s, 3), "output": (free.stdout + free.stderr)[-1500:]},
        "while_held": {"rc": busy.returncode, "seconds": round(busy_s, 3), "output": (busy.stdout + busy.stderr)[-2500:]},
        "after_release": {"rc": after.returncode, "output": (after.stdout + after.stderr)[-1500:]},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("gpu_check.json"))
    args = ap.parse_args()
    import torch

    report = {
        "machine": {"node": platform.node(), "python": platform.python_version(), "torch": torch.__version__,
                    "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
        "command": " ".join([sys.executable, *sys.argv]),
    }
    with tempfile.TemporaryDirectory() as tmp:
        report["generator"] = generator_checks(Path(tmp))
    report["guard"] = guard_checks()
    text = json.dumps(report, indent=2, default=str)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
