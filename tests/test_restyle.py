"""Restyled views, their keypoints and the drift tables: the maths on synthetic keypoints, the config
refusals, and one smoke sub-DAG (restyle -> keypoints -> drift) from the finished smoke ladder."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import INK, REPO, ink_config, run_snakemake
from fourloops import drift
from fourloops.backends import BACKENDS, SMOKE_BACKENDS
from fourloops.coco import COCO17_NAMES
from fourloops.config import ConfigError, check_config, schema_with_slices

DEFAULT_REGIONS = yaml.safe_load((REPO / "config" / "schema.d" / "drift.yaml").read_text())["properties"]["regions"]["default"]


def record(points, scores=None, size=512, bbox=(100.0, 50.0, 400.0, 450.0), detected=True):
    return {"detected": detected, "keypoints": [list(map(float, p)) for p in points],
            "keypoint_scores": list(scores if scores is not None else [0.9] * 17), "bbox": list(bbox),
            "keypoint_names": list(COCO17_NAMES), "image_size": [size, size]}


# ------------------------------------------------------------------------------------------ the maths
def test_a_known_displacement_gives_the_known_drift_in_render_pixels():
    rng = np.random.default_rng(0)
    ref = rng.uniform(100, 400, size=(17, 2))
    # the restyled view is 128 px: its points are the render's, moved by (3, 4) render px, at a quarter scale
    new = (ref + [3.0, 4.0]) / 4.0
    rows = drift.view_rows("ink", 90, record(ref), record(new, size=128), min_score=0.3)
    assert [r["joint"] for r in rows] == list(COCO17_NAMES)
    diagonal = math.hypot(300.0, 400.0)  # the render's person box, 300 x 400 px
    for r in rows:
        assert r["displacement_px"] == pytest.approx(5.0)
        assert r["displacement_norm"] == pytest.approx(5.0 / diagonal)
        assert r["bbox_diagonal_px"] == pytest.approx(500.0)
        assert r["low_confidence"] is False and r["note"] == ""


def test_low_confidence_is_flagged_below_the_threshold_on_either_side():
    pts = np.full((17, 2), 200.0)
    render_scores, restyled_scores = [0.9] * 17, [0.9] * 17
    render_scores[0], restyled_scores[1] = 0.29, 0.1
    rows = drift.view_rows("ink", 0, record(pts, render_scores), record(pts, restyled_scores), min_score=0.3)
    assert [r["joint"] for r in rows if r["low_confidence"]] == ["nose", "left_eye"]


def test_no_person_detected_gives_nan_and_says_why():
    pts = np.full((17, 2), 200.0)
    rows = drift.view_rows("ink", 0, record(pts), record(np.full((17, 2), np.nan), detected=False), min_score=0.3)
    assert all(math.isnan(r["displacement_px"]) and r["note"] == "no person detected in the restyled view"
               for r in rows)


def _table(rows):
    return pd.DataFrame(rows, columns=[c for c in drift.DRIFT_COLUMNS if c != "model_set"])


def test_regions_measure_what_coco17_has_and_refuse_a_number_for_the_rest():
    ref = np.full((17, 2), 200.0)
    new = ref.copy()
    new[COCO17_NAMES.index("nose")] += [10.0, 0.0]  # only the nose moves
    table = _table(drift.view_rows("ink", 0, record(ref), record(new), 0.3))
    got = {r["region"]: r for r in drift.region_rows("ink", table, DEFAULT_REGIONS)}
    assert list(got) == ["head", "body", "left_hand", "right_hand", "feet"]
    assert got["head"]["status"] == "MEASURED" and got["head"]["values"] == 5
    assert got["head"]["max_norm_drift"] == pytest.approx(10.0 / 500.0)
    assert got["head"]["mean_norm_drift"] == pytest.approx(10.0 / 500.0 / 5)
    assert got["body"]["status"] == "MEASURED" and got["body"]["max_norm_drift"] == 0.0
    for region in ("left_hand", "right_hand", "feet"):
        r = got[region]
        assert r["status"] == "NOT_RUN" and math.isnan(r["mean_norm_drift"]) and math.isnan(r["max_norm_drift"])
        assert "COCO-17" in r["reason"] and DEFAULT_REGIONS[region][0] in r["reason"]


def test_a_region_whose_values_are_all_low_confidence_has_no_number():
    pts = np.full((17, 2), 200.0)
    table = _table(drift.view_rows("ink", 0, record(pts, [0.1] * 17), record(pts), 0.3))
    (row,) = drift.region_rows("ink", table, {"head": ["nose", "left_eye"]})
    assert row["status"] == "NO_DATA" and math.isnan(row["mean_norm_drift"]) and row["low_confidence_left_out"] == 2
    assert "below the confidence threshold" in row["reason"]


# --------------------------------------------------------------------------------------- bad input
SCHEMA = schema_with_slices(REPO / "config" / "schema.yaml", REPO / "config" / "schema.d")


def refusal(tmp_path, extra: dict) -> str:
    from snakemake.utils import update_config, validate

    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump(SCHEMA))
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    update_config(config, extra)
    with pytest.raises(ConfigError) as err:
        check_config(config, path, BACKENDS, SMOKE_BACKENDS, lambda c, s: validate(c, s))
    return str(err.value)


@pytest.mark.parametrize("extra, expect", [
    ({"restyle": {"styles": {"ink": "  "}}}, "restyle.styles.ink = '  ': an empty instruction; allowed: the text"),
    ({"restyle": {"styles": {"ink": ""}}}, "restyle.styles.ink = '': an empty instruction"),
    ({"restyle": {"styles": {"ink": "paint it " * 120}}}, "restyle.styles.ink = 'paint it paint it paint it paint it pain'"
     "... (1080 bytes): longer than the text encoder can be sure to take; allowed: at most 1024 bytes"),
    ({"restyle": {"styles": {"ink": "é" * 513}}}, "(1026 bytes)"),                    # bytes, not characters
    ({"restyle": {"azimuths": [0, 100]}}, "restyle.azimuths[1] = 100: no render at that azimuth; allowed: one of azimuths [0, 45"),
    ({"drift": {"regions": {"head": ["nose", "left_pinkie"]}}},
     "drift.regions.head[1] = 'left_pinkie': unknown joint; allowed: a COCO-17 name (nose, left_eye"),
])
def test_bad_restyle_and_drift_config_is_refused(tmp_path, extra, expect):
    assert expect in refusal(tmp_path, extra)


# ----------------------------------------------------------------------------- the smoke sub-DAG
STYLES = INK


def write_config(path: Path, styles: dict, **extra) -> Path:
    return ink_config(path, styles, **extra)


@pytest.fixture(scope="module")
def restyled(restyled_graded):
    """The finished smoke ladder's workdir, copied, with one style restyled, detected and drifted: the session's
    sub-DAG (conftest.restyled_graded), which tests/test_grades.py grades."""
    return restyled_graded


def test_the_sub_dag_makes_every_view_from_one_load_and_the_tables(restyled):
    work = restyled["work"]
    manifest = json.loads((work / "results" / "restyle" / "ink" / "views.json").read_text())
    assert manifest["model_loads"] == 1 and manifest["model_set"] == "smoke"
    assert sorted(manifest["views"]) == ["0", "90"]
    assert [v["seed"] for v in manifest["views"].values()] == [20261101, 20261191]
    assert manifest["instruction"] == STYLES["ink"]
    assert not list((work / "results" / "restyle" / "ink").glob(".views-partial-*"))
    kp = json.loads((work / "results" / "keypoints" / "restyle" / "ink" / "az090.json").read_text())
    assert kp["image"] == "results/restyle/ink/az090.png"
    table = pd.read_csv(work / "results" / "drift" / "ink.csv")
    assert len(table) == 2 * 17 and set(table["azimuth"]) == {0, 90} and set(table["model_set"]) == {"smoke"}
    regions = pd.read_csv(work / "results" / "drift" / "ink.regions.csv", keep_default_na=False)
    assert list(regions["status"]) == ["MEASURED", "MEASURED", "NOT_RUN", "NOT_RUN", "NOT_RUN"]
    assert list(regions.loc[regions["status"] == "NOT_RUN", "mean_norm_drift"]) == ["NaN"] * 3
    assert (work / "results" / "drift" / "ink.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record = json.loads((work / "results" / "provenance" / "restyle" / "ink.json").read_text())
    assert record["model_set"] == "smoke"
    print(f"restyle sub-DAG: {restyled['seconds']:.1f} s")


def test_adding_a_style_makes_only_that_styles_jobs_stale(restyled, tmp_path):
    from test_workflow import planned_jobs

    cfg = write_config(tmp_path / "two.yaml", STYLES | {"oil": "Repaint this image as an oil painting."})
    proc = run_snakemake(restyled["work"], f"--configfile={cfg}", "-n", "results/drift/ink.csv",
                         "results/drift/oil.csv")
    assert planned_jobs(proc) == {("restyle", "style=oil"), ("keypoints_restyled", "kpset=restyle/oil"),
                                  ("drift", "style=oil")}, proc.stdout[-3000:]


def test_changing_the_detector_makes_drift_stale_but_not_restyle(restyled, tmp_path):
    from test_workflow import planned_jobs

    cfg = write_config(tmp_path / "det.yaml", STYLES, keypoints={"num_windows": 2})
    proc = run_snakemake(restyled["work"], f"--configfile={cfg}", "-n", "results/drift/ink.csv")
    assert planned_jobs(proc) == {("keypoints", "kpset=render"), ("keypoints_restyled", "kpset=restyle/ink"),
                                  ("drift", "style=ink")}, proc.stdout[-3000:]


@pytest.mark.parametrize("extra, expect", [
    ({"grades": {"num_pass": 0}}, "grades.num_pass = 0"),
    ({"grades": {"score_range": 0}}, "grades.score_range = 0"),
    ({"grades": {"score_range": -5}}, "grades.score_range = -5"),
    ({"grades": {"precision": "int8"}}, "grades.precision = 'int8'"),
    ({"grades": {"scorer": "OmniGen2/OmniGen2"}},
     "grades.scorer = 'OmniGen2/OmniGen2' is generator.model = 'OmniGen2/OmniGen2': a generator scoring its own"),
])
def test_bad_grades_config_is_refused(tmp_path, extra, expect):
    assert expect in refusal(tmp_path, extra)
