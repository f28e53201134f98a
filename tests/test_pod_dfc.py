"""The Dataflow Compiler on a pod: the RunPod executor uploads the user's wheel, builds the DFC's own venv
from it and runs the `container` job with FOURLOOPS_DFC_PYTHON naming that venv's interpreter. Real
Snakemake, real ssh and rsync to the loopback sshd, the v2 stand-in (tests/runpod_standin.py).

The DFC here is a throwaway wheel built in the test, named hailo_dataflow_compiler and holding the stand-in
hailo_sdk_client of tests/standins (it lives only under the test's tmp dir; the product never ships it or
falls back to it). Its one dependency, numpy, comes from a wheelhouse the test packs from this machine's
installed numpy, so the pod's pip runs with --no-index: no network.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from conftest import FAKE_SECRETS, REPO
from fourloops import dfc
from test_pod_executor import VENV_PY, _cmd, _env

STANDINS = REPO / "tests" / "standins"
MODEL = "rfdetr-keypoint"
DFC_VERSION = "0.0.0+standin"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _wheel_of_installed(dist_name: str, dest: Path) -> Path:
    """A wheel (PEP 427) of an installed distribution's files under site-packages: the pod's offline
    dependency, made without the network."""
    dist = importlib.metadata.distribution(dist_name)
    tag = next(line.split(": ", 1)[1] for line in dist.read_text("WHEEL").splitlines() if line.startswith("Tag: "))
    info = f"{dist.metadata['Name']}-{dist.version}.dist-info"
    out = dest / f"{dist.metadata['Name']}-{dist.version}-{tag}.whl"
    records = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for f in dist.files:
            rel = str(f)
            if rel.startswith("..") or rel.endswith(".pyc") or rel in (f"{info}/RECORD", f"{info}/INSTALLER",
                                                                       f"{info}/REQUESTED", f"{info}/direct_url.json"):
                continue
            data = Path(f.locate()).read_bytes()
            zf.writestr(rel, data)
            records.append(_record_line(rel, data))
        zf.writestr(f"{info}/RECORD", "\n".join(records + [f"{info}/RECORD,,"]) + "\n")
    return out


@pytest.fixture(scope="module")
def dfc_wheels(tmp_path_factory):
    """The throwaway DFC wheel (py3-none-linux_x86_64, by pip wheel + setuptools, offline) and a wheelhouse."""
    root = tmp_path_factory.mktemp("dfc-wheel")
    src = root / "src"
    shutil.copytree(STANDINS / "hailo_sdk_client", src / "hailo_sdk_client")
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "hailo_dataflow_compiler"\nversion = "{DFC_VERSION}"\ndependencies = ["numpy"]\n\n'
        '[tool.setuptools]\npackages = ["hailo_sdk_client"]\n')
    (src / "setup.cfg").write_text("[bdist_wheel]\npython_tag = py3\nplat_name = linux_x86_64\n")
    dl = root / "downloads"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "--no-index",
                    "-w", str(dl), str(src)], check=True, capture_output=True, timeout=120)
    (wheel,) = dl.glob("*.whl")
    assert wheel.name == f"hailo_dataflow_compiler-{DFC_VERSION}-py3-none-linux_x86_64.whl", wheel.name
    house = root / "wheelhouse"
    house.mkdir()
    _wheel_of_installed("numpy", house)
    return {"wheel": wheel, "house": house, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}


def _machines_with_env(tmp_path: Path, *names: str) -> Path:
    data = yaml.safe_load((REPO / "config" / "machines.yaml").read_text())
    data["pod"]["runpod"]["pod_env"] = ["HF_TOKEN", *names]
    out = tmp_path / "machines.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def _configfile(tmp_path: Path, **hef) -> Path:
    out = tmp_path / "dfc.yaml"
    out.write_text(yaml.safe_dump({"hef": hef}))
    return out


def test_container_job_on_a_pod_runs_in_the_dfc_venv_built_once_from_the_uploaded_wheel(
        built_copy, runpod_standin, tmp_path, dfc_wheels):
    """The export, allowlist and calib frames run here; the compile on the pod, whose first attempt raises in
    compile (a DFC failure) and whose retry on the same pod finds the venv by the wheel's digest: one
    upload, one build; both attempts ran the DFC under the venv's interpreter; the DFC version recorded."""
    work = built_copy
    calls, once = tmp_path / "calls.jsonl", tmp_path / "raised-once"
    standin_cfg = tmp_path / "standin.json"  # a file: a pod's environment (authorized_keys here) carries no quotes
    standin_cfg.write_text(json.dumps({"calls": str(calls), "raise_once_in": "compile", "once": str(once)}))
    cfg = _configfile(tmp_path, dfc_wheel=str(dfc_wheels["wheel"]), dfc_wheelhouse=str(dfc_wheels["house"]))
    cmd = _cmd(work, runpod_standin, f"results/hef/{MODEL}.hef", extra=(
        "--configfile", str(cfg), "--retries", "1", "--resources", "vram_mb=46000",  # as profiles/pod declares
        "--runpod-machines", str(_machines_with_env(tmp_path, "FOURLOOPS_DFC_STANDIN")),
        "--runpod-dfc-python", VENV_PY,  # the loopback pod's Python (the wheelhouse's numpy is for it)
    ))
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, timeout=400,
                          env=_env(tmp_path) | {"FOURLOOPS_DFC_STANDIN": str(standin_cfg)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    print(f"\nexport + allowlist + calib here, compile on the pod twice: {time.time() - t0:.1f} s")
    assert re.search(r"^localrule hef_export:", out, re.M) and re.search(r"^rule hef_compile:", out, re.M)
    # one upload and one build on the one pod; the retry found both by the wheel's digest
    assert len(runpod_standin.pods) == 1, out[-3000:]
    pod = next(iter(runpod_standin.pods.values()))
    assert len(re.findall(rf"uploading {re.escape(dfc_wheels['wheel'].name)} ", out)) == 1, out[-4000:]
    assert len(re.findall(r"uploading numpy-", out)) == 1
    assert len(re.findall(r"building the DFC venv on pod", out)) == 1
    assert "dependencies from the uploaded wheelhouse, no index" in out
    assert "standin: compile failed once" in out  # the first attempt's DFC error, from the pod's log
    assert re.search(r"wheel not uploaded again, nothing installed; DFC 0\.0\.0\+standin", out), out[-4000:]
    # the venv exists on the pod, recorded with the wheel's sha256 and the DFC version it reports
    dfc_root = Path(pod["workspace"]) / "fourloops" / "dfc"
    venv_python = str(dfc_root / "venv" / "bin" / "python")
    assert Path(venv_python).exists() and (dfc_root / "wheels" / dfc_wheels["wheel"].name).read_bytes() == \
        dfc_wheels["wheel"].read_bytes()
    marker = json.loads((dfc_root / "venv" / "fourloops-dfc.json").read_text())
    assert marker["sha256"] == dfc_wheels["sha256"] and marker["version"] == DFC_VERSION
    assert "include-system-site-packages = false" in (dfc_root / "venv" / "pyvenv.cfg").read_text()
    # both attempts ran the DFC under the venv's interpreter; the job itself under the workflow's
    seen = [json.loads(line) for line in calls.read_text().splitlines()]
    runners = [c for c in seen if c["call"] == "ClientRunner"]
    assert len(runners) == 2 and {c["python"] for c in seen} == {venv_python}, seen
    assert [c["call"] for c in seen][-6:] == ["ClientRunner", "translate_onnx_model", "load_model_script",
                                              "optimize", "compile", "save_har"]
    assert (work / "results" / "hef" / f"{MODEL}.hef").read_bytes() == b"HEF-standin-bytes"
    record = json.loads((work / "results" / "provenance" / "hef_compile" / f"{MODEL}.json").read_text())
    text = json.dumps(record)
    assert f'"python": "{venv_python}"' in text and f'"dfc_version": "{DFC_VERSION}"' in text, text[:3000]
    # the job's log: the venv's build (carried into the retry's log), then the DFC's own lines
    log = (work / "logs" / "hef" / f"{MODEL}.compile.log").read_text()
    assert "wheel not uploaded again" in log and "-m venv" in log
    assert re.search(r"Successfully installed .*hailo[-_]dataflow[-_]compiler-0\.0\.0\+standin", log), log[:4000]
    assert re.search(r"Processing \S+/dfc/wheelhouse/numpy-", log)  # the dependency from the uploaded wheelhouse
    assert f"{dfc.DFC_PYTHON_ENV}" in log and "Statistics Collector is done" in log
    assert "standin log file: compile" in log
    assert runpod_standin.listed() == [] and not runpod_standin.violations
    for f in [*(work / "logs").rglob("*"), *(work / "results" / "provenance").rglob("*")]:
        if f.is_file():
            for name, value in FAKE_SECRETS.items():
                assert value not in f.read_text(errors="replace"), f"{name} leaked into {f}"


def _bad_wheel(tmp_path: Path, case: str) -> str | None:
    value = {
        "unset": None,
        "missing": str(tmp_path / "hailo_dataflow_compiler-5.0.0-py3-none-linux_x86_64.whl"),
        "directory": str(tmp_path),
        "not_linux": str(tmp_path / "hailo_dataflow_compiler-5.0.0-py3-none-macosx_11_0_arm64.whl"),
        "not_dfc": str(tmp_path / "hailort-5.0.0-cp310-cp310-linux_x86_64.whl"),
    }[case]
    if case in ("not_linux", "not_dfc"):
        Path(value).write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip: the name is what is wrong
    return value


def _assert_names_the_wheel(out: str, case: str, value: str | None) -> None:
    key = "hef.dfc_wheel is not set" if value is None else f"hef.dfc_wheel = {value!r}"
    assert key in out and "Hailo developer zone (https://hailo.ai/developer-zone/)" in out, out[-3000:]
    assert {"missing": "no such file", "directory": "is not a file", "not_linux": "is not a Linux x86_64",
            "not_dfc": "is not a Linux x86_64", "unset": "not set"}[case] in out
    assert "nothing was rented" in out


def test_a_bad_dfc_wheel_is_refused_before_any_pod_is_rented(built_copy, runpod_standin, tmp_path):
    """hef.dfc_wheel unset: one clear error naming the key and the Hailo developer zone; no pod created, no API
    request, no job run. (Each other bad wheel takes this same path, the executor's DfcWheel.from_config: below.)"""
    work = built_copy
    value = _bad_wheel(tmp_path, "unset")
    cmd = _cmd(work, runpod_standin, f"results/hef/{MODEL}.hef", extra=(
        f"--configfile={_configfile(tmp_path, dfc_wheel=value)}", "--resources=vram_mb=46000"))
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, timeout=200, env=_env(tmp_path))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    _assert_names_the_wheel(out, "unset", value)
    assert runpod_standin.pods == {} and runpod_standin.create_attempts == []
    assert not re.search(r"^localrule hef_export:", out, re.M)  # before any job, not only before the pod


@pytest.mark.parametrize("case", ["unset", "missing", "directory", "not_linux", "not_dfc"])
def test_a_bad_dfc_wheel_is_named_by_the_executors_check(tmp_path, case):
    """hef.dfc_wheel unset, missing, a directory, or not a Linux x86_64 DFC wheel: the message the executor stops
    with (its check before any pod, through the CLI above), naming the key, the value and the Hailo developer zone."""
    from snakemake_executor_plugin_runpod.dfcvenv import DfcWheel
    from snakemake_executor_plugin_runpod.settings import SettingsError

    value = _bad_wheel(tmp_path, case)
    with pytest.raises(SettingsError) as err:
        DfcWheel.from_config({"dfc_wheel": value})
    _assert_names_the_wheel(str(err.value), case, value)


def test_which_wheel_names_are_a_linux_x86_64_dfc_wheel(tmp_path):
    ok = ["hailo_dataflow_compiler-5.0.0-py3-none-linux_x86_64.whl",
          "hailo_dataflow_compiler-3.27.0-py3-none-manylinux2014_x86_64.whl"]
    bad = ["hailo_dataflow_compiler-5.0.0-py3-none-any.whl", "hailo_dataflow_compiler-5.0.0-py3-none-linux_aarch64.whl",
           "hailo_model_zoo-2.17.1-py3-none-any.whl", "hailo_dataflow_compiler-5.0.0.tar.gz"]
    for name in ok + bad:
        (tmp_path / name).write_bytes(b"PK\x05\x06" + b"\0" * 18)
    assert [dfc.wheel_problem(str(tmp_path / n)) for n in ok] == [None, None]
    assert dfc.wheel_version(ok[0]) == "5.0.0" and dfc.wheel_version(ok[1]) == "3.27.0"
    for name in bad:
        assert "is not a Linux x86_64 Dataflow Compiler wheel" in dfc.wheel_problem(str(tmp_path / name)), name
    (tmp_path / "x").mkdir()
    assert "holds no *.whl file" in dfc.wheelhouse_problem(str(tmp_path / "x"))
    assert "is not a directory" in dfc.wheelhouse_problem(str(tmp_path / ok[0]))
    assert dfc.wheelhouse_problem(None) is None and dfc.wheelhouse_problem(str(tmp_path)) is None
