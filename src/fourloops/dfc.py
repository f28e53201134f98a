"""Hailo Dataflow Compiler glue: ONNX -> HAR -> HEF with `hailo_sdk_client.ClientRunner` (RFD 1165).

The DFC is a licensed wheel (Linux x86_64, Hailo developer zone) that the user names in `hef.dfc_wheel`;
fourloops never ships, downloads or imitates it. It lives in an environment of its own: the DFC pins its own
dependencies and its Python (3.8-3.10 for DFC 3.x, 3.10 for 5.x), while Snakemake 9 needs Python >= 3.11. So
the job runs under the workflow's environment and, where FOURLOOPS_DFC_PYTHON names the DFC environment's
interpreter (the desk container, envs/dfc/; the venv the RunPod executor builds on a pod), the DFC part runs as
a child process under that interpreter (`python -m fourloops.dfc <request>`, only this package's sources on
its path); without it, in this process. Every line the DFC logs lands in the job's log, its own log files
included, whether the compile finishes or raises, so what happened after the Statistics Collector is never lost
again. The HAR and HEF are written atomically.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from fourloops import io as fio

DEVELOPER_ZONE = "https://hailo.ai/developer-zone/"
DFC_DISTRIBUTION = "hailo_dataflow_compiler"
DFC_PYTHON_ENV = "FOURLOOPS_DFC_PYTHON"  # the DFC environment's interpreter, where it is not this one
# hailo_dataflow_compiler-<version>[-<build>]-<python tag>-<abi tag>-<platform tag>.whl (PEP 427)
WHEEL_NAME = re.compile(r"^hailo_dataflow_compiler-(?P<version>\d[^-]*)(?:-\d[^-]*)?-(?P<python>[^-]+)-(?P<abi>[^-]+)"
                        r"-(?P<platform>[^-]+)\.whl$")
WHEEL_EXPECTED = (f"the licensed Hailo Dataflow Compiler wheel, hailo_dataflow_compiler-<version>-py3-none-linux_x86_64.whl "
                  f"(DFC 5.x for hailo10h, 3.x for hailo8), downloaded from the Hailo developer zone ({DEVELOPER_ZONE})")


def wheel_problem(wheel) -> str | None:
    """None when `hef.dfc_wheel` names a Linux x86_64 DFC wheel that is a file, else what is wrong and where to get one."""
    if not wheel:
        return f"hef.dfc_wheel is not set: expected the path of {WHEEL_EXPECTED}"
    path = Path(os.path.expanduser(str(wheel)))
    if not path.exists():
        return f"hef.dfc_wheel = {str(wheel)!r}: no such file; expected the path of {WHEEL_EXPECTED}"
    if not path.is_file():
        return f"hef.dfc_wheel = {str(wheel)!r} is not a file; expected the path of {WHEEL_EXPECTED}"
    m = WHEEL_NAME.match(path.name)
    linux_x86_64 = m is not None and all(
        tag.startswith(("linux_", "manylinux")) and tag.endswith("_x86_64") for tag in m["platform"].split("."))
    if not linux_x86_64:
        return (f"hef.dfc_wheel = {str(wheel)!r}: {path.name!r} is not a Linux x86_64 Dataflow Compiler wheel; expected "
                f"{WHEEL_EXPECTED}")
    if not zipfile.is_zipfile(path):
        return f"hef.dfc_wheel = {str(wheel)!r}: {path.name!r} is not a wheel (not a zip archive); expected {WHEEL_EXPECTED}"
    return None


def wheel_version(wheel) -> str | None:
    """The DFC version in a wheel's file name."""
    m = WHEEL_NAME.match(Path(str(wheel)).name)
    return m["version"] if m else None


def wheelhouse_problem(house) -> str | None:
    """None when `hef.dfc_wheelhouse` is unset or a directory holding wheels, else what is wrong."""
    if house is None:
        return None
    path = Path(os.path.expanduser(str(house)))
    if not path.is_dir():
        return (f"hef.dfc_wheelhouse = {str(house)!r} is not a directory; expected null (the DFC's dependencies come "
                "from PyPI through the pod's network) or a directory of wheels (e.g. `pip download -d <dir> <the DFC "
                "wheel>` on a Linux x86_64 machine with the DFC's Python)")
    if not any(path.glob("*.whl")):
        return f"hef.dfc_wheelhouse = {str(house)!r} holds no *.whl file; expected a directory of the DFC's dependency wheels"
    return None


class DfcMissing(RuntimeError):
    pass


def missing_message(wheel: str | None) -> str:
    """What is missing when hailo_sdk_client cannot be imported, and how to get it."""
    if not wheel:
        state = "hef.dfc_wheel is not set"
    elif not Path(os.path.expanduser(wheel)).is_file():
        state = f"hef.dfc_wheel = {wheel!r} does not exist"
    else:
        state = f"hef.dfc_wheel = {wheel!r} exists but is not installed in this environment"
    return (f"the Hailo Dataflow Compiler (Python package hailo_sdk_client) is not installed here ({state}); it is a "
            f"licensed wheel (hailo_dataflow_compiler-*-py3-none-linux_x86_64.whl; DFC 5.x for hailo10h, 3.x for "
            f"hailo8) that you download from the Hailo developer zone ({DEVELOPER_ZONE}), name in hef.dfc_wheel, and "
            f"install into the container environment (envs/dfc/README.md)")


def installed_problem(wheel: str | None) -> str | None:
    """None when the DFC can be imported where the compile will run (FOURLOOPS_DFC_PYTHON's interpreter when set,
    else here), else what is missing and how to get it."""
    python = os.environ.get(DFC_PYTHON_ENV)
    if not python:
        return None if importlib.util.find_spec("hailo_sdk_client") else missing_message(wheel)
    try:
        ok = subprocess.run([python, "-c", "import hailo_sdk_client"], capture_output=True, timeout=300).returncode == 0
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{DFC_PYTHON_ENV} = {python!r} cannot run ({err}); {missing_message(wheel)}"
    return None if ok else f"{DFC_PYTHON_ENV} = {python!r} cannot import hailo_sdk_client; {missing_message(wheel)}"


def load_sdk(wheel: str | None):
    """The installed hailo_sdk_client, or DfcMissing naming the wheel and where to get it."""
    try:
        return importlib.import_module("hailo_sdk_client")
    except ImportError:
        raise DfcMissing(missing_message(wheel)) from None


def sdk_version(sdk) -> str:
    try:
        return importlib.metadata.version(DFC_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return str(getattr(sdk, "__version__", "unknown"))


def model_script(precision: str, optimization_level: int, compression_level: int, calib_batch: int) -> str:
    """The DFC model script: the precision for every layer, the optimisation flavour, the calibration batch."""
    return (
        f"quantization_param({{*}}, precision_mode={precision})\n"
        f"model_optimization_flavor(optimization_level={int(optimization_level)}, "
        f"compression_level={int(compression_level)})\n"
        f"model_optimization_config(calibration, batch_size={int(calib_batch)})\n"
    )


class _ToLog(logging.Handler):
    """Every DFC log record, whatever its logger's propagate flag, into the job's log stream."""

    def __init__(self, stream):
        super().__init__(level=logging.DEBUG)
        self.stream = stream
        self.setFormatter(logging.Formatter("%(asctime)s dfc %(name)s %(levelname)s %(message)s"))

    def emit(self, record):
        self.stream.write(self.format(record) + "\n")
        self.stream.flush()


def _attach(stream) -> list[tuple[logging.Logger, logging.Handler]]:
    """A handler on every DFC logger that does not reach the root's (the job's log) by itself."""
    attached = []
    for name in [n for n in logging.root.manager.loggerDict if n.startswith(("hailo", "acceleras"))]:
        logger = logging.getLogger(name)
        if not logger.propagate:
            handler = _ToLog(stream)
            logger.addHandler(handler)
            attached.append((logger, handler))
    return attached


def _copy_dfc_logs(scratch: Path, stream) -> None:
    """The DFC writes its own log files into its working directory: each into the job's log, whole."""
    for path in sorted(scratch.glob("*.log")):
        stream.write(f"----- DFC log file {path.name} -----\n")
        stream.write(path.read_text(errors="replace"))
        stream.write(f"----- end of {path.name} -----\n")
    stream.flush()


def compile_hef(onnx: str, calib: str, hef_out: str, har_out: str, *, name: str, hw_arch: str, precision: str,
                optimization_level: int, compression_level: int, calib_batch: int, wheel: str | None,
                log=None) -> dict:
    """translate_onnx_model -> load_model_script -> optimize(calib) -> compile -> the HEF; the HAR of the
    optimised model beside it. Nothing at hef_out or har_out unless the whole chain finished. Under
    FOURLOOPS_DFC_PYTHON's interpreter when that is set (a child process), else in this one."""
    args = dict(onnx=onnx, calib=calib, hef_out=hef_out, har_out=har_out, name=name, hw_arch=hw_arch,
                precision=precision, optimization_level=int(optimization_level),
                compression_level=int(compression_level), calib_batch=int(calib_batch), wheel=wheel)
    python = os.environ.get(DFC_PYTHON_ENV)
    if python:
        return _compile_under(python, args, log or sys.stderr)
    return _compile_here(**args, log=log)


class DfcFailed(RuntimeError):
    pass


def _compile_under(python: str, args: dict, stream) -> dict:
    """compile_hef in a child process under `python` (the DFC's environment): its output line by line into
    `stream` as it comes, its result from a file; the child dies with this process."""
    src = str(Path(__file__).resolve().parents[1])  # this package's sources, nothing of this environment's
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", DFC_PYTHON_ENV)}
    env.update(PYTHONPATH=src, PYTHONNOUSERSITE="1", PYTHONUNBUFFERED="1")
    out_dir = Path(args["hef_out"]).parent
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".dfc-call-", dir=out_dir) as tmp:
        request, result = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request.write_text(json.dumps({"args": args, "result": str(result)}))
        stream.write(f"fourloops: the DFC runs under {python} ({DFC_PYTHON_ENV})\n")
        stream.flush()
        try:
            proc = subprocess.Popen([python, "-m", "fourloops.dfc", str(request)], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, errors="replace",
                                    env=env)
        except OSError as err:
            raise DfcMissing(f"{DFC_PYTHON_ENV} = {python!r} cannot run ({err}); {missing_message(args['wheel'])}") from None
        last = ""
        for line in proc.stdout:
            stream.write(line)
            stream.flush()
            last = line.strip() or last
        code = proc.wait()
        if code != 0 or not result.exists():
            raise DfcFailed(f"the DFC under {python} exited {code}: {last or 'no output'} (every line of it is in the "
                            "job's log)")
        return json.loads(result.read_text())


def _child_main(argv: list[str]) -> None:
    """`python -m fourloops.dfc <request.json>`: compile_hef here, its result into the request's result file."""
    from fourloops import lifeline

    lifeline.set_parent_death_signal()  # the job that started us is gone: so are we
    request = json.loads(Path(argv[0]).read_text())
    info = _compile_here(**request["args"], log=sys.stderr)
    Path(request["result"]).write_text(json.dumps(info))


def _compile_here(onnx: str, calib: str, hef_out: str, har_out: str, *, name: str, hw_arch: str, precision: str,
                  optimization_level: int, compression_level: int, calib_batch: int, wheel: str | None,
                  log=None) -> dict:
    import numpy as np

    sdk = load_sdk(wheel)
    stream = log or sys.stderr
    script = model_script(precision, optimization_level, compression_level, calib_batch)
    version = sdk_version(sdk)
    stream.write(f"fourloops: DFC {version}, hw_arch {hw_arch}, model script:\n{script}")
    stream.flush()
    frames = np.load(calib)
    steps = []
    out_dir = Path(hef_out).parent
    out_dir.mkdir(parents=True, exist_ok=True)
    here = os.getcwd()
    attached = _attach(stream)
    scratch = Path(tempfile.mkdtemp(prefix=".dfc-", dir=out_dir)).resolve()  # absolute: we chdir into it
    try:
        os.chdir(scratch)  # the DFC's own log files land here, then in the job's log
        runner = sdk.ClientRunner(hw_arch=hw_arch)
        steps.append("translate_onnx_model")
        runner.translate_onnx_model(os.path.join(here, onnx) if not os.path.isabs(onnx) else onnx, name)
        steps.append("load_model_script")
        runner.load_model_script(script)
        steps.append("optimize")
        runner.optimize(frames)
        steps.append("compile")
        hef = runner.compile()
        if not isinstance(hef, (bytes, bytearray)) or not hef:
            raise RuntimeError(f"ClientRunner.compile() returned {type(hef).__name__}, not the HEF's bytes")
        har_tmp = scratch / "optimized.har"
        runner.save_har(str(har_tmp))
        os.chdir(here)
        with fio.atomic_path(har_out) as part:
            os.replace(har_tmp, part)
        fio.write_bytes(hef_out, bytes(hef))
    finally:
        os.chdir(here)
        for logger, handler in attached:
            logger.removeHandler(handler)
        _copy_dfc_logs(scratch, stream)
        for path in sorted(scratch.rglob("*"), reverse=True):
            path.unlink() if not path.is_dir() else path.rmdir()
        scratch.rmdir()
    return {"dfc_version": version, "hw_arch": hw_arch, "precision": precision,
            "optimization_level": int(optimization_level), "compression_level": int(compression_level),
            "model_script": script, "steps": steps, "calib_frames": int(frames.shape[0]),
            "hef_bytes": len(hef), "python": sys.executable}


def translate_check(onnx: str, *, name: str, hw_arch: str, sdk) -> dict:
    """The DFC's own parse of the ONNX for `hw_arch` (translate only): what the DFC says beside our allowlist."""
    runner = sdk.ClientRunner(hw_arch=hw_arch)
    try:
        runner.translate_onnx_model(onnx, name)
    except Exception as err:  # the DFC's parse errors are its verdict: recorded, and the job fails
        return {"ran": True, "ok": False, "error": f"{type(err).__name__}: {err}", "dfc_version": sdk_version(sdk)}
    return {"ran": True, "ok": True, "dfc_version": sdk_version(sdk)}


if __name__ == "__main__":
    _child_main(sys.argv[1:])
