"""A stand-in for the Hailo Dataflow Compiler's `hailo_sdk_client`, for tests only (tests/test_hef.py).

It is importable only where a test puts tests/standins on the path; the product never ships it or falls
back to it. tests/test_pod_dfc.py packs it into a throwaway wheel named hailo_dataflow_compiler. It records
each call (with the interpreter that made it), logs the way the DFC does (a logger and a log file in the
working directory), and fails or hangs in a named step when FOURLOOPS_DFC_STANDIN (that JSON, or a file
holding it) asks it to:
  {"calls": "<file to append one JSON line per call>", "raise_in": "compile", "hang_in": "compile",
   "started": "<file touched when the hanging step starts>",
   "raise_once_in": "compile", "once": "<file: raise only while it does not exist, then create it>"}
"""

import json
import logging
import os
import sys
import time

__version__ = "0.0.0-standin"
_log = logging.getLogger("hailo_sdk_client.runner")
_log.propagate = False  # the real DFC's loggers keep to themselves too, at their own level
_log.setLevel(logging.INFO)


def _settings():
    value = os.environ.get("FOURLOOPS_DFC_STANDIN", "{}")
    if not value.lstrip().startswith("{"):  # a file holding the JSON (an environment that cannot carry quotes)
        value = open(value).read()
    return json.loads(value)


def _step(name, **args):
    cfg = _settings()
    if cfg.get("calls"):
        with open(cfg["calls"], "a") as fh:
            fh.write(json.dumps({"call": name, "python": sys.executable, **args}) + "\n")
    _log.info("standin %s", name)
    with open("hailo_sdk.client.log", "a") as fh:
        fh.write(f"standin log file: {name}\n")
    if cfg.get("hang_in") == name:
        open(cfg["started"], "w").close()
        time.sleep(600)
    if cfg.get("raise_once_in") == name and not os.path.exists(cfg["once"]):
        open(cfg["once"], "w").close()
        raise RuntimeError(f"standin: {name} failed once (AccelerasResourceError-like)")
    if cfg.get("raise_in") == name:
        raise RuntimeError(f"standin: {name} failed (AccelerasResourceError-like)")


class ClientRunner:
    def __init__(self, hw_arch=None, har=None):
        _step("ClientRunner", hw_arch=hw_arch)
        self.hw_arch = hw_arch

    def translate_onnx_model(self, model, net_name, **kw):
        _step("translate_onnx_model", model=model, net_name=net_name, exists=os.path.isfile(model))
        return {}, {}

    def load_model_script(self, script):
        _step("load_model_script", script=script)

    def optimize(self, calib_data):
        _step("optimize", shape=list(calib_data.shape), dtype=str(calib_data.dtype))
        _log.info("Statistics Collector is done")

    def compile(self):
        _step("compile")
        return b"HEF-standin-bytes"

    def save_har(self, path):
        _step("save_har")
        with open(path, "wb") as fh:
            fh.write(b"HAR-standin")
