"""Hailo Dataflow Compiler glue: ONNX -> HAR -> HEF with `hailo_sdk_client.ClientRunner` (RFD 1165).

The DFC is a licensed wheel (Linux x86_64, Hailo developer zone) that the user installs into the
`container` environment (envs/dfc/); fourloops never ships, downloads or imitates it. Every line the DFC
logs lands in the job's log, its own log files included, whether the compile finishes or raises, so what
happened after the Statistics Collector is never lost again. The HAR and HEF are written atomically.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import os
import sys
import tempfile
from pathlib import Path

from fourloops import io as fio

DEVELOPER_ZONE = "https://hailo.ai/developer-zone/"
DFC_DISTRIBUTION = "hailo_dataflow_compiler"


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
    optimised model beside it. Nothing at hef_out or har_out unless the whole chain finished."""
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
    scratch = Path(tempfile.mkdtemp(prefix=".dfc-", dir=out_dir))
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
            "hef_bytes": len(hef)}


def translate_check(onnx: str, *, name: str, hw_arch: str, sdk) -> dict:
    """The DFC's own parse of the ONNX for `hw_arch` (translate only): what the DFC says beside our allowlist."""
    runner = sdk.ClientRunner(hw_arch=hw_arch)
    try:
        runner.translate_onnx_model(onnx, name)
    except Exception as err:  # the DFC's parse errors are its verdict: recorded, and the job fails
        return {"ran": True, "ok": False, "error": f"{type(err).__name__}: {err}", "dfc_version": sdk_version(sdk)}
    return {"ran": True, "ok": True, "dfc_version": sdk_version(sdk)}
