"""rules/hef.smk: the detector the export and the CPU baseline load, and the HEF chain's settings."""

from __future__ import annotations

LINEAGE = False  # a job's inputs and params, not its code: a change shows in them

import os

from fourloops import model_sets


def hef_detector_inputs(config: dict, wildcards) -> dict:
    return model_sets.built_models(config, "detector")


def hef_settings(config: dict) -> dict:
    hef = config["hef"]
    return dict(hef, dfc_wheel=os.path.expanduser(hef["dfc_wheel"]) if hef["dfc_wheel"] else None)
