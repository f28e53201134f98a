"""The azimuth fit recovers the camera from the Anny skeleton's projected ground-truth keypoints."""

import numpy as np
import pytest

from fourloops.camera import OrbitCamera, wrap_deg
from fourloops.fit import fit_azimuth


@pytest.fixture(scope="module")
def body():
    from fourloops.body import DEFAULT_PHENOTYPE, DEFAULT_POSE, build_body

    return build_body(dict(DEFAULT_PHENOTYPE), dict(DEFAULT_POSE))


@pytest.fixture(scope="module")
def camera(body):
    return OrbitCamera(distance_m=3.2, elevation_deg=10.0, focal_px=600.0, image_size=512, target=tuple(body.center))


GRID = [0, 45, 90, 135, 180, 225, 270, 315]
OFF_GRID = [20, 200, 7.5, 101, 333.3, 359]


@pytest.mark.parametrize("azimuth", GRID + OFF_GRID)
def test_fit_recovers_azimuth_from_ground_truth_within_2_degrees(body, camera, azimuth):
    uv, _ = camera.project(body.keypoints3d, azimuth)
    result = fit_azimuth(uv, np.ones(17), body.keypoints3d, camera)
    assert abs(wrap_deg(result.azimuth_deg - azimuth)) <= 2.0, result
    assert result.residual < 1e-3
    assert result.confidence > 0.5


@pytest.mark.parametrize("azimuth", [30, 160, 250])
def test_fit_ignores_where_and_how_large_the_body_is_in_frame(body, camera, azimuth):
    uv, _ = camera.project(body.keypoints3d, azimuth)
    moved = 0.6 * uv + np.array([40.0, -25.0])
    result = fit_azimuth(moved, np.ones(17), body.keypoints3d, camera)
    assert abs(wrap_deg(result.azimuth_deg - azimuth)) <= 2.0
    assert result.scale == pytest.approx(0.6, rel=0.05)


@pytest.mark.parametrize("azimuth", [0, 60, 180, 300])
def test_left_right_labels_decide_front_from_back(body, camera, azimuth):
    """Swapping COCO's left/right labels turns the view into its mirror: the fit must move."""
    uv, _ = camera.project(body.keypoints3d, azimuth)
    swap = [0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15]
    result = fit_azimuth(uv[swap], np.ones(17), body.keypoints3d, camera)
    assert result.residual > 1e-3 or abs(wrap_deg(result.azimuth_deg - azimuth)) > 2.0


def test_noise_degrades_gracefully(body, camera):
    rng = np.random.default_rng(0)
    errors = []
    for azimuth in GRID:
        uv, _ = camera.project(body.keypoints3d, azimuth)
        result = fit_azimuth(uv + rng.normal(0, 2.0, uv.shape), np.ones(17), body.keypoints3d, camera)
        errors.append(abs(wrap_deg(result.azimuth_deg - azimuth)))
    assert max(errors) < 10.0, errors


def test_too_few_points_gives_nan_with_a_reason(body, camera):
    uv, _ = camera.project(body.keypoints3d, 45)
    weights = np.zeros(17)
    weights[:3] = 1
    result = fit_azimuth(uv, weights, body.keypoints3d, camera)
    assert np.isnan(result.azimuth_deg)
    assert "usable keypoints" in result.reason


def test_wrap_deg_interval():
    assert wrap_deg(180.0) == 180.0
    assert wrap_deg(-180.0) == 180.0
    assert wrap_deg(190.0) == -170.0
    assert wrap_deg(-10.0) == -10.0
    assert wrap_deg(360.0) == 0.0
