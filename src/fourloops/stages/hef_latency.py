"""The HEF on the desk's Hailo USB device: `hailortcli run2`, parsed from its JSON (RFD 1163)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from fourloops.io import write_json


def run2_stage(hef_path: str, export_record: str, out: str, hef: dict) -> dict:
    from fourloops import hailort
    from fourloops.io import read_json, sha256_file

    if hailort.hailortcli() is None:
        raise RuntimeError(f"hailortcli is not on PATH; install HailoRT from {hailort.HAILORT_DOWNLOAD}")
    lat = hef["latency"]
    with tempfile.TemporaryDirectory(prefix=".run2-", dir=os.path.dirname(out) or ".") as tmp:
        stats = os.path.join(tmp, "stats.json")
        cmd = hailort.run2_command(hef_path, stats, seconds=int(lat["run2_seconds"]), measure_power=bool(lat["measure_power"]))
        print("fourloops: " + " ".join(cmd), file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, timeout=int(lat["run2_seconds"]) + 300)
        if proc.returncode != 0:
            raise RuntimeError(f"hailortcli run2 exited {proc.returncode} (its output is in this job's log)")
        raw = hailort.read_json(stats)
    parsed = hailort.parse_run2(raw, require=("fps", "hw_latency_ms") + (("power_w",) if lat["measure_power"] else ()))
    exported = read_json(export_record)
    record = {"row": "device", "where": f"Hailo {hef['hw_arch']} over USB ({parsed['device_id']})",
              "model": exported["detector"]["weights_sha256"][:16], "export": export_key(exported["export"]),
              "resolution": exported["export"]["resolution"], "precision": hef["precision"],
              "latency_ms": parsed["hw_latency_ms"], "latency_kind": "hw latency (run2), device half",
              "fps": parsed["fps"], "power_w": parsed["power_w"], "runs": None, "hef_sha256": sha256_file(hef_path),
              "command": cmd, "run2": raw, "parsed": parsed}
    write_json(out, record)
    return {"precision": hef["precision"], "latency": {k: record[k] for k in ("latency_ms", "fps", "power_w")}}


def export_key(export: dict) -> str:
    return f"{export['resolution']}px num_windows={export['num_windows']}"
