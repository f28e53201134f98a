"""The Anny body: frame, labels, defaults, determinism and input checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

torch.set_num_threads(1)

from fourloops.body import (  # noqa: E402
    COCO17_NAMES,
    DEFAULT_PHENOTYPE,
    DEFAULT_POSE,
    Body,
    bone_names,
    build_body,
    phenotype_keys,
)

LEFT_RIGHT = [(n, n.replace("left_", "right_")) for n in COCO17_NAMES if n.startswith("left_")]


def idx(name: str) -> int:
    return COCO17_NAMES.index(name)


@pytest.fixture(scope="session")
def body() -> Body:
    return build_body(DEFAULT_PHENOTYPE, DEFAULT_POSE)


@pytest.fixture(scope="session")
def rest_body() -> Body:
    return build_body(DEFAULT_PHENOTYPE, {})


def test_lists_match_anny(body):
    from fourloops.body import _model

    model, regressor, _ = _model()
    assert phenotype_keys() == list(model.phenotype_labels)
    assert bone_names() == list(model.bone_labels)
    assert len(bone_names()) == 104
    assert list(regressor.labels) == list(COCO17_NAMES)
    assert set(DEFAULT_PHENOTYPE) <= set(phenotype_keys())
    assert set(DEFAULT_POSE) <= set(bone_names())


def test_shapes_and_types(body):
    assert body.vertices.shape == (13718, 3) and body.vertices.dtype == np.float64
    assert body.faces.shape == (27420, 3) and np.issubdtype(body.faces.dtype, np.integer)
    assert body.faces.min() == 0 and body.faces.max() == len(body.vertices) - 1
    assert body.keypoints3d.shape == (17, 3) and body.keypoints3d.dtype == np.float64
    assert len(COCO17_NAMES) == 17 and COCO17_NAMES[0] == "nose" and COCO17_NAMES[-1] == "right_ankle"
    np.testing.assert_allclose(body.center, (body.vertices.min(0) + body.vertices.max(0)) / 2)
    assert 1.5 < body.height_m < 2.0
    assert not body.vertices.flags.writeable and not body.keypoints3d.flags.writeable


def test_rest_frame(rest_body):
    """Z up, the body faces -Y, left_* joints on +X of right_*, feet on the ground z = 0."""
    k, v = rest_body.keypoints3d, rest_body.vertices
    for left, right in LEFT_RIGHT:
        assert k[idx(left), 0] > k[idx(right), 0] + 0.03, (left, right)
    # Z up: head above shoulders above hips above knees above ankles.
    z = {n: k[idx(n), 2] for n in COCO17_NAMES}
    assert z["nose"] > z["left_shoulder"] > z["left_hip"] > z["left_knee"] > z["left_ankle"]
    # Faces -Y: nose and eyes in front of the ears; toes (the most -Y foot vertices) in front of the ankles.
    ears_y = (k[idx("left_ear"), 1] + k[idx("right_ear"), 1]) / 2
    assert k[idx("nose"), 1] < ears_y - 0.05
    assert k[idx("left_eye"), 1] < ears_y and k[idx("right_eye"), 1] < ears_y
    feet = v[v[:, 2] < 0.1]
    assert feet[:, 1].min() < k[idx("left_ankle"), 1] - 0.1
    # Feet at the bottom, on z = 0; height is the vertical extent.
    assert v[:, 2].min() == 0.0
    assert z["left_ankle"] < 0.15 and z["right_ankle"] < 0.15
    assert rest_body.height_m == pytest.approx(v[:, 2].max(), abs=1e-9)
    # Rest pose is left/right mirror symmetric.
    mirrored = k.copy()
    mirrored[:, 0] *= -1
    for left, right in LEFT_RIGHT:
        mirrored[[idx(left), idx(right)]] = mirrored[[idx(right), idx(left)]]
    np.testing.assert_allclose(mirrored, k, atol=0.01)


def test_faces_wind_outwards(rest_body):
    v, f = rest_body.vertices, rest_body.faces
    signed_volume = np.einsum("ij,ij->i", v[f[:, 0]], np.cross(v[f[:, 1]], v[f[:, 2]])).sum() / 6.0
    assert 0.04 < signed_volume < 0.15  # m^3, positive: counter-clockwise seen from outside


def test_default_pose_natural_and_asymmetric(body, rest_body):
    k = body.keypoints3d
    for left, right in [("left_shoulder", "right_shoulder"), ("left_hip", "right_hip")]:
        assert k[idx(left), 0] > k[idx(right), 0] + 0.1
    # Not mirror symmetric.
    mirrored = k.copy()
    mirrored[:, 0] *= -1
    for left, right in LEFT_RIGHT:
        mirrored[[idx(left), idx(right)]] = mirrored[[idx(right), idx(left)]]
    assert np.abs(mirrored - k).max() > 0.15
    # Arms hang below the shoulders (lowered from the T-pose), wrists stay below the shoulders.
    for side in ("left", "right"):
        assert k[idx(f"{side}_elbow"), 2] < k[idx(f"{side}_shoulder"), 2] - 0.15
        assert k[idx(f"{side}_wrist"), 2] < k[idx(f"{side}_shoulder"), 2] - 0.1
    left_arm = k[idx("left_elbow")] - k[idx("left_shoulder")]
    assert np.degrees(np.arctan2(-left_arm[2], left_arm[0])) > 55  # below horizontal
    # The right elbow is bent forwards: wrist well in front of the elbow.
    assert k[idx("right_wrist"), 1] < k[idx("right_elbow"), 1] - 0.15
    # A step: the left ankle ahead of the right one, both feet near the ground.
    assert k[idx("left_ankle"), 1] < k[idx("right_ankle"), 1] - 0.15
    assert k[idx("left_ankle"), 2] < 0.25 and k[idx("right_ankle"), 2] < 0.25
    assert body.height_m == rest_body.height_m


def test_deterministic(body):
    again = build_body(dict(DEFAULT_PHENOTYPE), {k: list(v) for k, v in DEFAULT_POSE.items()})
    for name in ("vertices", "faces", "keypoints3d", "center"):
        assert np.array_equal(getattr(body, name), getattr(again, name)), name
    assert body.height_m == again.height_m


def test_zero_rotations_are_rest(rest_body):
    zeros = build_body(DEFAULT_PHENOTYPE, {"upperarm01.L": [0, 0, 0]})
    assert np.array_equal(zeros.vertices, rest_body.vertices)


def test_phenotype_changes_body(rest_body):
    tall = build_body({**DEFAULT_PHENOTYPE, "height": 1.0}, {})
    assert tall.height_m > rest_body.height_m + 0.1


def test_unknown_phenotype_key():
    with pytest.raises(ValueError) as err:
        build_body({"hieght": 0.5}, {})
    msg = str(err.value)
    assert "hieght" in msg and all(k in msg for k in phenotype_keys())


def test_unknown_bone():
    with pytest.raises(ValueError) as err:
        build_body({}, {"upper_arm_left": [0, 10, 0]})
    msg = str(err.value)
    assert "upper_arm_left" in msg and "upperarm01.L" in msg and "lowerleg01.R" in msg


@pytest.mark.parametrize(
    "phenotype, pose",
    [
        ({"age": 1.5}, {}),
        ({"weight": "heavy"}, {}),
        ({}, {"head": [0, 10]}),
        ({}, {"head": [0, float("nan"), 0]}),
        ({}, {"head": 10}),
    ],
)
def test_bad_values(phenotype, pose):
    with pytest.raises(ValueError):
        build_body(phenotype, pose)


def test_a_damaged_anny_cache_file_is_dropped_so_anny_rebuilds_it(tmp_path):
    import torch
    from safetensors.torch import save_file

    from fourloops.body import drop_damaged_cache_files

    (tmp_path / "v14").mkdir()
    good, bad = tmp_path / "v14" / "load_data_a.safetensors", tmp_path / "v14" / "build_model_data_b.safetensors"
    save_file({"x": torch.zeros(64)}, str(good))
    save_file({"x": torch.zeros(64)}, str(bad))
    bad.write_bytes(bad.read_bytes()[:100])  # truncated, as by a killed build
    assert drop_damaged_cache_files(tmp_path) == [bad]
    assert good.exists() and not bad.exists()
    assert drop_damaged_cache_files(tmp_path) == []
