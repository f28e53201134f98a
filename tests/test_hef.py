"""The HEF chain: export parity and census on the smoke detector, the allowlist, the precision table,
the DFC glue against a stand-in hailo_sdk_client (tests/standins, never on the product's path), the
run2 JSON parser, the latency table, and the compile's walls."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, SNAKEMAKE, snakemake_env
from fourloops import asks, hailort, hef, machines, preflight, refusal, walls
from fourloops.stage import AskContext, stage_for

STANDINS = REPO / "tests" / "standins"
MACHINES = machines.load(REPO / "config" / "machines.yaml")
FACTS = asks.load_facts(REPO / "config" / "models.yaml")
SIDE = 96  # the smallest side the detector takes at num_windows=1 that keeps the export under seconds


def hef_config(**over) -> dict:
    import yaml

    schema = yaml.safe_load((REPO / "config" / "schema.d" / "hef.yaml").read_text())
    cfg = {k: v["default"] for k, v in schema["properties"].items() if "default" in v}
    cfg["latency"] = {k: v["default"] for k, v in schema["properties"]["latency"]["properties"].items()}
    cfg.update(over)
    return cfg


# ------------------------------------------------------------------------------------- export
@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from fourloops.keypoints import build_smoke_detector
    from fourloops.stages.hef_export import export_stage
    from fourloops.stages.smoke_models import SMOKE_DETECTOR_SHRINK

    d = tmp_path_factory.mktemp("hef")
    build_smoke_detector(d / "det.pth", 7, resolution=SIDE, num_windows=1, **SMOKE_DETECTOR_SHRINK)
    detector = {"weights": str(d / "det.pth"), "device": "cpu", "resolution": SIDE, "num_windows": 1}
    t0 = time.perf_counter()
    export_stage(str(d / "m.onnx"), str(d / "m.export.json"), detector, hef_config())
    return {"dir": d, "record": json.loads((d / "m.export.json").read_text()), "detector": detector,
            "seconds": time.perf_counter() - t0}


def test_export_parity_and_census_counted_on_the_smoke_detector(exported):
    import onnx

    rec = exported["record"]
    passes = rec["export"].pop("optimizer")
    assert rec["export"] == {"resolution": SIDE, "num_windows": 1, "opset": 17, "batch": 1,
                             "exporter": "rfdetr RFDETR.export(format='onnx', backbone_only=True)"}
    # the Identity nodes torch's exporter leaves are folded before the census, and parity is checked after it
    assert passes["passes"] == ["eliminate_identity"] and passes["optimizer"].startswith("onnxoptimizer ")
    assert passes["nodes_before"] > passes["nodes_after"]
    assert rec["parity"]["max_abs_diff"] <= 1.0e-4 and rec["parity"]["inputs"] == 2
    graph = onnx.load(str(exported["dir"] / "m.onnx")).graph
    census = rec["census"]
    assert "Identity" not in census["operators"]
    assert passes["nodes_after"] == census["nodes"]
    assert census["nodes"] == len(graph.node) == sum(census["operators"].values())
    assert census["inputs"] == [{"name": "input", "shape": [1, 3, SIDE, SIDE]}]
    # counted: the device half is the backbone; the whole model adds the decoder and heads
    import torch

    whole = torch.load(exported["detector"]["weights"], weights_only=False)["model"]
    backbone = sum(t.numel() for k, t in whole.items() if k.startswith("backbone.0.") and "num_batches" not in k)
    assert rec["parameters"]["device_half"] == backbone
    assert rec["parameters"]["whole_model"] == rec["detector"]["parameter_count"] > backbone
    assert census["initializer_elements"] <= backbone


def test_parity_above_the_threshold_fails(exported):
    from fourloops.keypoints import load_detector

    det = load_detector(exported["detector"]["weights"], resolution=SIDE, num_windows=1)
    with pytest.raises(hef.ParityError, match=r"above hef.parity_max_abs_diff = 1e-12"):
        hef.parity(det, exported["dir"] / "m.onnx", n_inputs=1, seed=0, threshold=1e-12)


# ---------------------------------------------------------------------------------- allowlist
def test_an_operator_outside_the_allowlist_is_reported_by_name_and_count(exported, tmp_path):
    from fourloops.stages.hef_export import allowlist_stage

    ops = exported["record"]["census"]["operators"]
    default = hef_config()["allowlist"]["hailo10h"]
    narrowed = [op for op in default if op != "Softmax"]
    out = tmp_path / "m.allowlist.txt"
    rec = allowlist_stage(str(exported["dir"] / "m.export.json"), str(exported["dir"] / "m.onnx"), str(out),
                          hef_config(allowlist={"hailo10h": narrowed}))
    assert out.read_text() == f"Softmax {ops['Softmax']}\n" and ops["Softmax"] > 0
    assert rec["allowlist"]["outside"] == {"Softmax": ops["Softmax"]}
    assert rec["allowlist"]["dfc_translate"]["ran"] is False  # no DFC on this machine
    # the default list clears the export: empty is the good answer
    allowlist_stage(str(exported["dir"] / "m.export.json"), str(exported["dir"] / "m.onnx"), str(out), hef_config())
    assert out.read_text() == ""


def test_with_the_dfc_present_the_allowlist_runs_its_translate_too(exported, tmp_path, monkeypatch):
    from fourloops.stages.hef_export import allowlist_stage

    calls = tmp_path / "calls.jsonl"
    monkeypatch.syspath_prepend(str(STANDINS))
    monkeypatch.setenv("FOURLOOPS_DFC_STANDIN", json.dumps({"calls": str(calls)}))
    monkeypatch.chdir(tmp_path)
    try:
        rec = allowlist_stage(str(exported["dir"] / "m.export.json"), str(exported["dir"] / "m.onnx"),
                              str(tmp_path / "a.txt"), hef_config())
    finally:
        sys.modules.pop("hailo_sdk_client", None)
    assert rec["allowlist"]["dfc_translate"] == {"ran": True, "ok": True, "dfc_version": "0.0.0-standin"}
    assert [json.loads(line)["call"] for line in calls.read_text().splitlines()] == ["ClientRunner", "translate_onnx_model"]


# ---------------------------------------------------------------------------------- precision
def test_precision_is_checked_against_the_hw_arch_table():
    refused = hef.precision_problem({"hw_arch": "hailo10h", "precision": "a16_w16"}, MACHINES)
    assert refused == ("hef.precision = 'a16_w16': hailo10h cannot run it; allowed: one of ['a8_w8'] (ceiling a8_w8; "
                       "source: RFD 1165: a16_w16 is refused by the part (twelve precision_change layers); a8_w8 is "
                       "the ceiling)")
    assert hef.precision_problem({"hw_arch": "hailo10h", "precision": "a8_w8"}, MACHINES) is None
    unknown = hef.precision_problem({"hw_arch": "hailo9", "precision": "a8_w8"}, MACHINES)
    assert unknown.startswith("hef.hw_arch = 'hailo9': no precision table") and unknown.endswith("allowed: one of ['hailo10h']")


def test_a16_w16_stops_the_workflow_when_the_config_is_read(tmp_path):
    (tmp_path / "c.yaml").write_text("hef:\n  precision: a16_w16\n")
    proc = subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--profile", str(REPO / "profiles" / "smoke"),
                           "--directory", str(tmp_path), "--configfile", str(tmp_path / "c.yaml"), "-n",
                           "results/hef/rfdetr-keypoint.allowlist.txt"],
                          capture_output=True, text=True, env=snakemake_env(), cwd=tmp_path, timeout=300)
    assert proc.returncode != 0
    assert "hef.precision = 'a16_w16': hailo10h cannot run it" in proc.stderr + proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "smoke"] or sorted(
        p.name for p in tmp_path.iterdir()) == ["c.yaml"]
    assert not list(tmp_path.rglob("results"))


# ------------------------------------------------------------------------------------ the DFC
def compile_args(d: Path) -> dict:
    (d / "m.onnx").write_bytes(b"onnx")
    np.save(d / "calib.npy", np.zeros((4, SIDE, SIDE, 3), dtype=np.float32))
    return dict(onnx=str(d / "m.onnx"), calib=str(d / "calib.npy"), hef_out=str(d / "out" / "m.hef"),
                har_out=str(d / "out" / "m.har"), name="m", hw_arch="hailo10h", precision="a8_w8",
                optimization_level=2, compression_level=0, calib_batch=8, wheel=None)


@pytest.fixture
def standin(tmp_path, monkeypatch):
    calls = tmp_path / "calls.jsonl"
    monkeypatch.syspath_prepend(str(STANDINS))
    yield lambda **cfg: monkeypatch.setenv("FOURLOOPS_DFC_STANDIN", json.dumps({"calls": str(calls), **cfg})) or calls
    sys.modules.pop("hailo_sdk_client", None)


def test_the_dfc_glue_calls_in_order_with_the_model_script_and_lands_the_files(tmp_path, standin):
    import io

    from fourloops import dfc

    calls, log = standin(), io.StringIO()
    info = dfc.compile_hef(**compile_args(tmp_path), log=log)
    seen = [json.loads(line) for line in calls.read_text().splitlines()]
    assert [c["call"] for c in seen] == ["ClientRunner", "translate_onnx_model", "load_model_script", "optimize",
                                         "compile", "save_har"]
    assert seen[0]["hw_arch"] == "hailo10h" and seen[1]["exists"] is True
    script = ("quantization_param({*}, precision_mode=a8_w8)\n"
              "model_optimization_flavor(optimization_level=2, compression_level=0)\n"
              "model_optimization_config(calibration, batch_size=8)\n")
    assert seen[2]["script"] == script == info["model_script"]
    assert seen[3]["shape"] == [4, SIDE, SIDE, 3] and seen[3]["dtype"] == "float32"
    assert (tmp_path / "out" / "m.hef").read_bytes() == b"HEF-standin-bytes"
    assert (tmp_path / "out" / "m.har").read_bytes() == b"HAR-standin"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["m.har", "m.hef"]  # no scratch left
    assert info["precision"] == "a8_w8" and info["dfc_version"] == "0.0.0-standin"
    text = log.getvalue()
    assert "Statistics Collector is done" in text and "standin log file: compile" in text


def test_a_compile_that_raises_leaves_no_output_and_keeps_every_dfc_line(tmp_path, standin):
    import io

    from fourloops import dfc

    standin(raise_in="compile")
    log = io.StringIO()
    with pytest.raises(RuntimeError, match="standin: compile failed"):
        dfc.compile_hef(**compile_args(tmp_path), log=log)
    assert list((tmp_path / "out").iterdir()) == []
    assert "Statistics Collector is done" in log.getvalue()  # what happened after it is in the log
    assert "standin log file: compile" in log.getvalue()


def test_a_killed_compile_leaves_nothing_that_looks_complete(tmp_path):
    args = compile_args(tmp_path)
    started = tmp_path / "started"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(STANDINS)]),
               FOURLOOPS_DFC_STANDIN=json.dumps({"hang_in": "compile", "started": str(started)}))
    code = f"from fourloops.dfc import compile_hef; compile_hef(**{args!r})"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path)
    try:
        for _ in range(600):
            if started.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert started.exists(), "the stand-in never reached compile"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = [p.name for p in (tmp_path / "out").iterdir()]
    assert left and all(name.startswith(".") for name in left), left  # only hidden scratch
    assert not (tmp_path / "out" / "m.hef").exists() and not (tmp_path / "out" / "m.har").exists()


def test_without_the_dfc_the_error_names_the_wheel_and_where_to_get_it(tmp_path):
    from fourloops import dfc

    wheel = str(tmp_path / "hailo_dataflow_compiler-5.0.0-py3-none-linux_x86_64.whl")
    with pytest.raises(dfc.DfcMissing) as err:
        dfc.load_sdk(wheel)
    assert f"hef.dfc_wheel = {wheel!r} does not exist" in str(err.value)
    assert "Hailo developer zone (https://hailo.ai/developer-zone/)" in str(err.value)
    msg = preflight.check(preflight.Need("dfc", wheel, rule="hef_compile"))
    assert msg.startswith("rule hef_compile: the Hailo Dataflow Compiler (Python package hailo_sdk_client)")
    assert preflight.check(preflight.Need("executable", "hailortcli", rule="hef_run2")).startswith(
        "executable hailortcli (rule hef_run2) is not on PATH; install HailoRT from https://hailo.ai/developer-zone/")
    assert "hailortcli is not on PATH" in preflight.check(preflight.Need("device", "hailo_usb", rule="hef_run2"))


# ------------------------------------------------------------------------------------- run2
SAMPLE = {  # the shape hailortcli run2 -j writes (network_live_track.cpp, measurement_live_track.cpp)
    "network_groups": [{"name": "rfdetr_keypoint", "full_hef_path": "/w/results/hef/rfdetr-keypoint.hef",
                        "FPS": "412.503021", "hw_latency": 2.27, "overall_latency": 4.45}],
    "devices": [{"device_id": "0000:usb.4:13", "power": {"min": "1.100000 W", "max": "2.900000 W",
                                                         "average": "2.250000 W"}}],
}


def test_run2_json_is_parsed_with_power_when_present():
    assert hailort.parse_run2(json.dumps(SAMPLE), require=("fps", "hw_latency_ms", "power_w")) == {
        "network_group": "rfdetr_keypoint", "hef": "/w/results/hef/rfdetr-keypoint.hef", "fps": 412.503021,
        "hw_latency_ms": 2.27, "overall_latency_ms": 4.45, "power_w": 2.25, "device_id": "0000:usb.4:13"}


def test_run2_json_missing_hw_latency_is_an_error_naming_it():
    sample = json.loads(json.dumps(SAMPLE))
    del sample["network_groups"][0]["hw_latency"]
    del sample["devices"][0]["power"]
    with pytest.raises(hailort.Run2Error, match=r"^run2 JSON: hw_latency missing from network_groups\[0\]"):
        hailort.parse_run2(sample)
    assert hailort.parse_run2(sample, require=("fps",))["power_w"] is None


def test_run2_command_is_the_documented_one():
    assert hailort.run2_command("m.hef", "stats.json", seconds=10, measure_power=False) == [
        "hailortcli", "run2", "-t", "10", "--measure-latency", "--measure-overall-latency", "-j", "stats.json",
        "set-net", "m.hef"]


def test_the_table_divides_only_the_same_model_and_export():
    import csv

    device = {"row": "device", "model": "abc", "export": "576px num_windows=1", "latency_ms": 2.0}
    cpu = {"row": "cpu", "model": "abc", "export": "576px num_windows=1", "latency_ms": 2386.1, "runs": 10}
    same = list(csv.DictReader(hailort.latency_table(device, cpu).splitlines()))
    assert [r["row"] for r in same] == ["device", "cpu"] and {r["speedup"] for r in same} == {"1193.050"}
    other = list(csv.DictReader(hailort.latency_table(device, dict(cpu, export="576px num_windows=2")).splitlines()))
    assert {r["speedup"] for r in other} == {""}
    assert {r["note"] for r in other} == {
        "no speedup: export 576px num_windows=1 on the device, 576px num_windows=2 on the CPU"}


def test_the_preflight_asks_the_dfc_environments_interpreter_when_one_is_named(monkeypatch):
    """FOURLOOPS_DFC_PYTHON (the desk container's /opt/dfc, a pod's venv): the DFC must import THERE."""
    monkeypatch.setenv("FOURLOOPS_DFC_PYTHON", sys.executable)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    msg = preflight.check(preflight.Need("dfc", "", rule="hef_compile"))
    assert msg.startswith(f"rule hef_compile: FOURLOOPS_DFC_PYTHON = {sys.executable!r} cannot import hailo_sdk_client; "
                          "the Hailo Dataflow Compiler"), msg
    monkeypatch.setenv("PYTHONPATH", str(STANDINS))  # an interpreter that has it
    assert preflight.check(preflight.Need("dfc", "", rule="hef_compile")) is None
    monkeypatch.setenv("FOURLOOPS_DFC_PYTHON", "/nonexistent/bin/python")
    assert "cannot run" in preflight.check(preflight.Need("dfc", "", rule="hef_compile"))


# ------------------------------------------------------------------------------------- walls
def test_the_compile_is_refused_on_the_desk_and_fits_the_pod():
    stage = stage_for("hef_compile")
    job = walls.PendingJob("hef_compile", "results/hef/rfdetr-keypoint.hef", stage.profile,
                           stage.ask_for(AskContext(FACTS), {}, {"hef": hef_config()}))
    desk = walls.check_jobs([job], MACHINES, "desk")
    text = refusal.report(desk, MACHINES)
    assert not desk.ok and "32.50 GiB" in text and "39.87 GiB" in text and "licensed software" in text
    assert walls.check_jobs([job], MACHINES, "pod").ok
