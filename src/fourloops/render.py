"""Headless renders of the Anny body with pyrender on EGL, and their ground-truth COCO-17 keypoints.

One `Renderer` per process (one GL context, fixed image size) renders any number of views:

    with Renderer(512) as renderer:
        for az in azimuths:
            result = renderer.render(body, camera, az)

Pixel convention (the camera's): u right, v down, pixel (i, j) covers u in [i, i+1), v in [j, j+1),
so a keypoint at (u, v) lies in pixel (floor(u), floor(v)) and pixel centres sit at half-integers.
pyrender samples each pixel at its centre with the intrinsics of `OrbitCamera.intrinsics()`, so the
silhouette lines up with `OrbitCamera.project` (tested to within 2 px; measured sub-pixel).

Visibility (COCO): 2 = in the image and not occluded, 1 = in the image but occluded by the body,
0 = outside the image (or behind the camera). A keypoint is occluded when it lies more than a margin
behind the rendered surface at its pixel. The margin depends on where the keypoint sits
(`OCCLUSION_MARGINS_M`), from gaps (keypoint depth minus surface depth) measured on the default body
at azimuths 0, 45, ..., 315:
  - nose and eyes lie on the skin: 0.00-0.01 m when seen; 0.04 m or more once the nose or brow
    hides them (the far eye in profile: 0.04) -> margin 0.03 m.
  - ears lie on the side of the head: up to 0.07 m when seen (from the front, the cheek in front of
    them); 0.11 m or more on the far side of the head -> margin 0.10 m.
  - limb joints (shoulders, elbows, wrists, knees, ankles) sit inside the limbs: up to 0.10-0.135 m
    when seen (the far shoulder at a 45-degree oblique from behind is the deepest); 0.145 m or more
    when the torso or the other limb is in front (far shoulder or elbow in profile: 0.37-0.86 m;
    the raised far wrist: 0.4-0.7 m) -> margin 0.14 m.
  - hips sit deepest, in the pelvis: up to 0.125 m behind the buttocks of the default body seen from
    behind and 0.18 m for the heaviest phenotype; the far hip in profile 0.28-0.36 m -> margin 0.20 m.
    (The far hip at a 45-degree oblique, 0.15-0.25 m behind the near side of the same pelvis, comes
    out either way: COCO annotators disagree there too.)
Measured on the default phenotype and on the extremes gender 0 / height 1 / weight 1 and age 1 /
gender 1 / weight 1 / muscle 0; `Renderer(occlusion_margins_m={...})` overrides a group.
"""

from __future__ import annotations

import os

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import importlib.util
import math
from dataclasses import dataclass

import numpy as np
from PIL import Image

from fourloops.body import Body
from fourloops.camera import OrbitCamera


def _preload_triton() -> None:
    """Load triton (torch's kernel compiler, pulled in by `import anny` via torch) before Mesa.

    Mesa's llvmpipe driver links the system libLLVM and triton's libtriton bundles its own LLVM;
    loading libtriton after an EGL context exists segfaults the process (seen with Mesa 22.3.6 /
    LLVM 15 and the triton wheel torch 2.14.1 pins). Loaded in the other order both work.
    """
    if importlib.util.find_spec("triton") is not None:
        import triton  # noqa: F401


_preload_triton()

# Shading: a light skin tone (linear RGB; pyrender writes linear values without gamma), matte,
# lit by a directional light from slightly above and to the side of the camera plus ambient light,
# so the limbs and torso read as rounded shapes.
SKIN_RGBA = (0.80, 0.56, 0.44, 1.0)
SKIN_ROUGHNESS = 0.75
AMBIENT_RGB = (0.30, 0.30, 0.30)
KEY_LIGHT_INTENSITY = 3.0
KEY_LIGHT_TILT_DEG = (-25.0, 15.0)  # about the camera's x (down from above) and y (from the side)
# Occlusion margins in metres by keypoint group (see the module docstring for the measurements).
OCCLUSION_MARGINS_M = {"face": 0.03, "ears": 0.10, "limbs": 0.14, "hips": 0.20}
_KEYPOINT_GROUP = ("face",) * 3 + ("ears",) * 2 + ("limbs",) * 6 + ("hips",) * 2 + ("limbs",) * 4  # COCO17_NAMES order


@dataclass(frozen=True, eq=False)
class RenderResult:
    image: Image.Image  # RGB, image_size x image_size
    depth: np.ndarray  # (H, W) float32, camera-axis depth in metres, 0 where background
    keypoints2d: np.ndarray  # (17, 2) float64 pixels (u, v), COCO17_NAMES order
    visibility: np.ndarray  # (17,) int, COCO: 2 visible, 1 occluded by the body, 0 outside the image
    keypoint_depth: np.ndarray  # (17,) float64, camera-axis depth of each joint in metres


def _rot_x(deg: float) -> np.ndarray:
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[1.0, 0.0, 0.0, 0.0], [0.0, c, -s, 0.0], [0.0, s, c, 0.0], [0.0, 0.0, 0.0, 1.0]])


def _rot_y(deg: float) -> np.ndarray:
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[c, 0.0, s, 0.0], [0.0, 1.0, 0.0, 0.0], [-s, 0.0, c, 0.0], [0.0, 0.0, 0.0, 1.0]])


def keypoint_margins(margins_m: dict[str, float] | None = None) -> np.ndarray:
    """Per-keypoint occlusion margins (17,) in COCO17_NAMES order."""
    m = {**OCCLUSION_MARGINS_M, **(margins_m or {})}
    unknown = set(m) - set(OCCLUSION_MARGINS_M)
    if unknown:
        raise ValueError(f"unknown occlusion margin group(s) {sorted(unknown)}; allowed: {list(OCCLUSION_MARGINS_M)}")
    return np.array([float(m[g]) for g in _KEYPOINT_GROUP])


def keypoint_visibility(
    keypoints2d: np.ndarray, keypoint_depth: np.ndarray, depth: np.ndarray, margins_m: np.ndarray
) -> np.ndarray:
    """COCO visibility of projected keypoints against a rendered depth map (0 = background).

    Keypoint k is occluded (1) when its depth exceeds the surface depth at its pixel by more than
    margins_m[k]; a keypoint whose pixel shows background is visible (2); outside the image, 0.
    """
    margins_m = np.broadcast_to(np.asarray(margins_m, dtype=float), (len(keypoints2d),))
    h, w = depth.shape
    vis = np.zeros(len(keypoints2d), dtype=np.int64)
    for k, ((u, v), z) in enumerate(zip(keypoints2d, keypoint_depth)):
        if not (np.isfinite(u) and np.isfinite(v)) or z <= 0 or not (0 <= u < w and 0 <= v < h):
            continue
        surface = float(depth[int(math.floor(v)), int(math.floor(u))])
        vis[k] = 1 if surface > 0 and z > surface + margins_m[k] else 2
    return vis


class Renderer:
    """One offscreen EGL context and scene; `render` re-poses the camera and swaps the mesh as needed."""

    def __init__(self, image_size: int, occlusion_margins_m: dict[str, float] | None = None):
        import pyrender

        self._pyrender = pyrender
        self.image_size = int(image_size)
        self.occlusion_margins_m = keypoint_margins(occlusion_margins_m)
        self._renderer = pyrender.OffscreenRenderer(self.image_size, self.image_size)
        self._scene = pyrender.Scene(bg_color=[1.0, 1.0, 1.0, 1.0], ambient_light=list(AMBIENT_RGB))
        c = self.image_size / 2.0
        self._camera = pyrender.IntrinsicsCamera(fx=1.0, fy=1.0, cx=c, cy=c, znear=0.05, zfar=100.0)
        self._camera_node = self._scene.add(self._camera, pose=np.eye(4))
        light = pyrender.DirectionalLight(color=np.ones(3), intensity=KEY_LIGHT_INTENSITY)
        self._light_node = self._scene.add(light, pose=np.eye(4))
        self._material = pyrender.MetallicRoughnessMaterial(
            baseColorFactor=SKIN_RGBA, metallicFactor=0.0, roughnessFactor=SKIN_ROUGHNESS
        )
        self._mesh_node = None
        self._mesh_body: Body | None = None

    # -------------------------------------------------------------------------------- lifecycle
    def close(self) -> None:
        """Free this renderer's GL context. Other Renderers in the process keep working: pyrender's own
        `delete()` also calls eglTerminate on the process-wide EGL display, which kills every other
        context, so an EGL context is destroyed here without terminating the display."""
        if self._renderer is None:
            return
        offscreen, self._renderer = self._renderer, None
        platform = getattr(offscreen, "_platform", None)
        if type(platform).__name__ != "EGLPlatform":
            offscreen.delete()
            return
        from OpenGL import EGL

        platform.make_current()
        offscreen._renderer.delete()
        EGL.eglMakeCurrent(platform._egl_display, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)
        EGL.eglDestroyContext(platform._egl_display, platform._egl_context)
        platform._egl_context = None
        platform._egl_display = None  # so the platform's __del__ does not eglTerminate the shared display
        offscreen._renderer = offscreen._platform = None

    def __enter__(self) -> "Renderer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----------------------------------------------------------------------------------- render
    def _set_body(self, body: Body) -> None:
        if self._mesh_body is body:
            return
        import trimesh

        if self._mesh_node is not None:
            self._scene.remove_node(self._mesh_node)
            self._mesh_node = None
        tm = trimesh.Trimesh(vertices=np.array(body.vertices), faces=np.array(body.faces), process=False)
        mesh = self._pyrender.Mesh.from_trimesh(tm, material=self._material, smooth=True)
        self._mesh_node = self._scene.add(mesh)
        self._mesh_body = body

    def render(
        self,
        body: Body,
        camera: OrbitCamera,
        azimuth_deg: float,
        background_rgb: tuple[int, int, int] = (255, 255, 255),
    ) -> RenderResult:
        if self._renderer is None:
            raise RuntimeError("Renderer is closed")
        if int(camera.image_size) != self.image_size:
            raise ValueError(f"camera.image_size {camera.image_size} != renderer image size {self.image_size}")
        if len(background_rgb) != 3 or not all(0 <= int(c) <= 255 for c in background_rgb):
            raise ValueError(f"background_rgb must be three integers in [0, 255], got {background_rgb!r}")
        self._set_body(body)

        self._camera.fx = self._camera.fy = float(camera.focal_px)
        self._camera.cx = self._camera.cy = self.image_size / 2.0
        self._camera.zfar = float(camera.distance_m) + 10.0
        pose = camera.camera_pose_opengl(azimuth_deg)
        self._scene.set_pose(self._camera_node, pose)
        self._scene.set_pose(self._light_node, pose @ _rot_y(KEY_LIGHT_TILT_DEG[1]) @ _rot_x(KEY_LIGHT_TILT_DEG[0]))
        self._scene.bg_color = np.array([*(int(c) / 255.0 for c in background_rgb), 1.0])

        color, depth = self._renderer.render(self._scene)
        depth = np.ascontiguousarray(depth, dtype=np.float32)
        image = Image.fromarray(np.ascontiguousarray(color[:, :, :3], dtype=np.uint8), mode="RGB")

        keypoints2d, kp_depth = camera.project(body.keypoints3d, azimuth_deg)
        vis = keypoint_visibility(keypoints2d, kp_depth, depth, self.occlusion_margins_m)
        return RenderResult(
            image=image, depth=depth, keypoints2d=keypoints2d, visibility=vis, keypoint_depth=kp_depth
        )
