"""Renders of the Anny body: alignment with the camera projection, framing, visibility, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

torch.set_num_threads(1)

from fourloops.body import COCO17_NAMES, DEFAULT_PHENOTYPE, DEFAULT_POSE, build_body  # noqa: E402
from fourloops.camera import OrbitCamera  # noqa: E402
from fourloops.render import Renderer, RenderResult  # noqa: E402

SIZE = 512
AZIMUTHS = [0, 45, 90, 135, 180, 225, 270, 315]


def idx(name: str) -> int:
    return COCO17_NAMES.index(name)


@pytest.fixture(scope="module")
def body():
    return build_body(DEFAULT_PHENOTYPE, DEFAULT_POSE)


@pytest.fixture(scope="module")
def camera(body):
    return OrbitCamera(distance_m=3.2, elevation_deg=10.0, focal_px=600.0, image_size=SIZE, target=tuple(body.center))


@pytest.fixture(scope="module")
def renderer():
    with Renderer(SIZE) as r:
        yield r


@pytest.fixture(scope="module")
def views(renderer, body, camera) -> dict[int, RenderResult]:
    return {az: renderer.render(body, camera, az) for az in AZIMUTHS}


def silhouette_bbox(depth: np.ndarray) -> np.ndarray:
    ys, xs = np.nonzero(depth > 0)
    return np.array([xs.min(), ys.min(), xs.max(), ys.max()], dtype=float)


def test_result_types(views, body, camera):
    res = views[0]
    assert res.image.mode == "RGB" and res.image.size == (SIZE, SIZE)
    assert res.depth.shape == (SIZE, SIZE) and res.depth.dtype == np.float32
    assert res.keypoints2d.shape == (17, 2) and res.visibility.shape == (17,)
    assert np.issubdtype(res.visibility.dtype, np.integer)
    uv, _ = camera.project(body.keypoints3d, 0)
    np.testing.assert_array_equal(res.keypoints2d, uv)


@pytest.mark.parametrize("az", AZIMUTHS)
def test_silhouette_matches_projection(views, body, camera, az):
    """The rendered silhouette's bbox equals the projected vertices' bbox (pixel centres at +0.5)."""
    uv, _ = camera.project(body.vertices, az)
    projected = np.concatenate([uv.min(0), uv.max(0)]) - 0.5
    np.testing.assert_allclose(silhouette_bbox(views[az].depth), projected, atol=2.0)


def test_silhouette_matches_projection_small_image(body):
    cam = OrbitCamera(3.2, 10.0, 300.0, 256, tuple(body.center))
    with Renderer(256) as r:
        for az in (30, 200):
            uv, _ = cam.project(body.vertices, az)
            projected = np.concatenate([uv.min(0), uv.max(0)]) - 0.5
            np.testing.assert_allclose(silhouette_bbox(r.render(body, cam, az).depth), projected, atol=2.0)


@pytest.mark.parametrize("az", AZIMUTHS)
def test_whole_body_in_frame(views, az):
    res = views[az]
    assert (res.visibility > 0).all()
    x0, y0, x1, y1 = silhouette_bbox(res.depth)
    margin = 0.1 * SIZE  # at least 51 px of background on every side
    assert x0 > margin and y0 > margin and x1 < SIZE - 1 - margin and y1 < SIZE - 1 - margin


def test_background_and_shading(views):
    res = views[0]
    img = np.asarray(res.image)
    body_px = res.depth > 0
    # Flat white background where the depth is empty, except the anti-aliased (MSAA) rim next to the body...
    from scipy.ndimage import binary_dilation

    rim = binary_dilation(body_px, iterations=2)
    assert (img[~rim] == 255).all()
    assert (img[~body_px] == 255).all(axis=1).mean() > 0.99
    inner = img[body_px].astype(int)
    assert (inner[:, 0] > inner[:, 2]).mean() > 0.95  # ...and a warm skin tone on the body
    lum = inner.mean(1)
    assert lum.std() > 8 and 60 < np.median(lum) < 245  # shaded, not a flat fill


def test_custom_background(renderer, body, camera):
    res = renderer.render(body, camera, 0, background_rgb=(10, 200, 30))
    img = np.asarray(res.image)
    assert (img[0, 0] == [10, 200, 30]).all() and (img[-1, -1] == [10, 200, 30]).all()
    assert (img[res.depth == 0] == [10, 200, 30]).all(axis=1).mean() > 0.99


def test_visibility_front_and_back(views):
    assert (views[0].visibility == 2).all()
    back = views[180].visibility
    assert all(back[idx(n)] == 1 for n in ("nose", "left_eye", "right_eye"))
    assert all(back[idx(n)] == 2 for n in ("left_ear", "right_ear", "left_shoulder", "right_hip"))


@pytest.mark.parametrize("az, near, far", [(90, "left", "right"), (270, "right", "left")])
def test_visibility_profile(views, az, near, far):
    vis = views[az].visibility
    for joint in ("shoulder", "elbow", "hip", "knee", "ankle"):
        assert vis[idx(f"{near}_{joint}")] == 2, (near, joint)
    hidden = [j for j in ("ear", "shoulder", "elbow", "hip") if vis[idx(f"{far}_{j}")] == 1]
    assert len(hidden) >= 3, hidden


def test_visibility_outside_image(renderer, body):
    close = OrbitCamera(1.0, 10.0, 600.0, SIZE, tuple(body.center))
    res = renderer.render(body, close, 0)
    u, v = res.keypoints2d.T
    inside = (u >= 0) & (u < SIZE) & (v >= 0) & (v < SIZE)
    assert not inside.all() and inside.any()
    assert (res.visibility[~inside] == 0).all() and (res.visibility[inside] > 0).all()


def test_render_deterministic(renderer, views, body, camera):
    again = renderer.render(body, camera, 45)
    assert again.image.tobytes() == views[45].image.tobytes()
    assert np.array_equal(again.depth, views[45].depth)
    with Renderer(SIZE) as fresh:
        other = fresh.render(build_body(DEFAULT_PHENOTYPE, DEFAULT_POSE), camera, 45)
    assert other.image.tobytes() == views[45].image.tobytes()
    assert np.array_equal(other.visibility, views[45].visibility)


def test_wrong_image_size(renderer, body):
    with pytest.raises(ValueError):
        renderer.render(body, OrbitCamera(3.2, 10.0, 600.0, 256, tuple(body.center)), 0)


def test_anny_import_after_gl_context():
    """Creating the GL context before anny (and so torch's triton) is imported must not crash the process."""
    import subprocess
    import sys

    code = (
        "from fourloops.render import Renderer\n"
        "r = Renderer(64)\n"
        "import anny, triton\n"
        "r.close()\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-2000:]
