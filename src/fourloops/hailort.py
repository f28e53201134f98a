"""HailoRT on the desk: `hailortcli run2` on the USB device, its JSON statistics, and the latency table
beside the CPU baseline.

run2's JSON (`-j FILE`, HailoRT's hailortcli/run2: network_live_track.cpp, measurement_live_track.cpp):
  {"network_groups": [{"name", "full_hef_path", "FPS": "<text>", "hw_latency": <ms>, "overall_latency": <ms>}],
   "devices": [{"device_id", "power": {"min": "<x> W", "max": "<x> W", "average": "<x> W"}}]}
FPS is written as text; a latency is absent when it was not measured; power only with --measure-power.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from pathlib import Path

HAILORT_DOWNLOAD = "https://hailo.ai/developer-zone/ (HailoRT for your OS, with its USB driver)"


class Run2Error(ValueError):
    pass


def run2_command(hef: str, json_out: str, *, seconds: int, measure_power: bool) -> list[str]:
    cmd = ["hailortcli", "run2", "-t", str(int(seconds)), "--measure-latency", "--measure-overall-latency"]
    if measure_power:
        cmd.append("--measure-power")
    return cmd + ["-j", str(json_out), "set-net", str(hef)]


def _number(value, where: str) -> float:
    try:
        out = float(str(value).split()[0]) if isinstance(value, str) else float(value)
    except (TypeError, ValueError, IndexError):
        raise Run2Error(f"run2 JSON: {where} = {value!r} is not a number") from None
    if not math.isfinite(out):
        raise Run2Error(f"run2 JSON: {where} = {value!r} is not finite")
    return out


def parse_run2(data: dict | str, *, require: tuple[str, ...] = ("fps", "hw_latency_ms")) -> dict:
    """The one network group's FPS, hw and overall latency (ms), and average power (W) when present.
    A field named in `require` that run2 did not write is an error naming it; others are None."""
    if isinstance(data, str):
        data = json.loads(data)
    groups = data.get("network_groups") if isinstance(data, dict) else None
    if not isinstance(groups, list) or len(groups) != 1:
        raise Run2Error(f"run2 JSON: expected one entry in network_groups, found {groups!r:.200}")
    g = groups[0]
    out = {
        "network_group": g.get("name"),
        "hef": g.get("full_hef_path"),
        "fps": _number(g["FPS"], "network_groups[0].FPS") if "FPS" in g else None,
        "hw_latency_ms": _number(g["hw_latency"], "network_groups[0].hw_latency") if "hw_latency" in g else None,
        "overall_latency_ms": (_number(g["overall_latency"], "network_groups[0].overall_latency")
                               if "overall_latency" in g else None),
        "power_w": None,
        "device_id": None,
    }
    devices = data.get("devices") or []
    if devices:
        dev = devices[0]
        out["device_id"] = dev.get("device_id")
        if isinstance(dev.get("power"), dict) and "average" in dev["power"]:
            out["power_w"] = _number(dev["power"]["average"], "devices[0].power.average")
    names = {"fps": "FPS", "hw_latency_ms": "hw_latency", "overall_latency_ms": "overall_latency",
             "power_w": "devices[0].power.average"}
    missing = [names[k] for k in require if out.get(k) is None]
    if missing:
        raise Run2Error(f"run2 JSON: {', '.join(missing)} missing from network_groups[0] (run2 measures latency only "
                        "with --measure-latency, power only with --measure-power)")
    return out


def hailortcli() -> str | None:
    return shutil.which("hailortcli")


# ------------------------------------------------------------------------------------- table
COLUMNS = ("row", "where", "model", "export", "resolution", "precision", "latency_ms", "latency_kind", "fps",
           "power_w", "runs", "speedup", "note")


def latency_table(device: dict, cpu: dict) -> str:
    """The device row and the CPU row in one CSV; the speedup only when both rows are the same model and
    export, otherwise the note says why not."""
    same = device["model"] == cpu["model"] and device["export"] == cpu["export"]
    if same:
        speedup = cpu["latency_ms"] / device["latency_ms"]
        note = f"speedup = CPU median / device hw latency, same model {device['model']} and export {device['export']}"
    else:
        speedup = None
        why = []
        if device["model"] != cpu["model"]:
            why.append(f"model {device['model']} on the device, {cpu['model']} on the CPU")
        if device["export"] != cpu["export"]:
            why.append(f"export {device['export']} on the device, {cpu['export']} on the CPU")
        note = "no speedup: " + "; ".join(why)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in (device, cpu):
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in COLUMNS if k not in ("speedup", "note")}
                        | {"speedup": "" if speedup is None else f"{speedup:.3f}", "note": note})
    return buf.getvalue()


def read_json(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())
