"""The orbit camera shared by the renderer and the azimuth fit.

World frame is Anny's: metres, Z up, the body faces -Y, +X is the body's left.
Azimuth 0 puts the camera in front of the body (on -Y); azimuth grows counter-clockwise
seen from above, so azimuth 90 puts the camera on +X, looking at the body's left side.
Pixels follow the image convention: u to the right, v down, origin at the top-left corner,
principal point at the image centre, square pixels (fx = fy = focal_px).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def wrap_deg(angle: float | np.ndarray) -> float | np.ndarray:
    """Wrap an angle in degrees to the interval (-180, 180]."""
    wrapped = -((-np.asarray(angle, dtype=float) + 180.0) % 360.0 - 180.0)
    return float(wrapped) if np.ndim(wrapped) == 0 else wrapped


@dataclass(frozen=True)
class OrbitCamera:
    distance_m: float
    elevation_deg: float
    focal_px: float
    image_size: int
    target: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def position(self, azimuth_deg: float) -> np.ndarray:
        """Camera centre in world coordinates."""
        az, el = math.radians(azimuth_deg), math.radians(self.elevation_deg)
        offset = np.array(
            [
                self.distance_m * math.cos(el) * math.sin(az),
                -self.distance_m * math.cos(el) * math.cos(az),
                self.distance_m * math.sin(el),
            ]
        )
        return np.asarray(self.target, dtype=float) + offset

    def world_to_camera(self, azimuth_deg: float) -> np.ndarray:
        """4x4 matrix taking world points to OpenCV camera coordinates (x right, y down, z forward)."""
        eye = self.position(azimuth_deg)
        forward = np.asarray(self.target, dtype=float) - eye
        forward /= np.linalg.norm(forward)
        up_world = np.array([0.0, 0.0, 1.0])
        right = np.cross(forward, up_world)
        right /= np.linalg.norm(right)
        down = np.cross(forward, right)
        rot = np.stack([right, down, forward])  # rows: camera axes in world coordinates
        mat = np.eye(4)
        mat[:3, :3] = rot
        mat[:3, 3] = -rot @ eye
        return mat

    def camera_pose_opengl(self, azimuth_deg: float) -> np.ndarray:
        """4x4 camera-to-world pose in OpenGL convention (x right, y up, looking down -z), for pyrender."""
        w2c = self.world_to_camera(azimuth_deg)
        c2w = np.linalg.inv(w2c)
        flip = np.diag([1.0, -1.0, -1.0, 1.0])  # OpenCV camera axes -> OpenGL camera axes
        return c2w @ flip

    def intrinsics(self) -> np.ndarray:
        c = self.image_size / 2.0
        return np.array([[self.focal_px, 0.0, c], [0.0, self.focal_px, c], [0.0, 0.0, 1.0]])

    def project(self, points: np.ndarray, azimuth_deg: float) -> tuple[np.ndarray, np.ndarray]:
        """Project world points (N, 3) to pixels (N, 2); also return their depth along the view axis (N,)."""
        pts = np.asarray(points, dtype=float)
        w2c = self.world_to_camera(azimuth_deg)
        cam = pts @ w2c[:3, :3].T + w2c[:3, 3]
        depth = cam[:, 2]
        uv = cam[:, :2] / depth[:, None] * self.focal_px + self.image_size / 2.0
        return uv, depth


def camera_from(camera: dict, center) -> OrbitCamera:
    """The config's `camera` mapping, aimed at `center` (the body's)."""
    return OrbitCamera(
        distance_m=float(camera["distance_m"]),
        elevation_deg=float(camera["elevation_deg"]),
        focal_px=float(camera["focal_px"]),
        image_size=int(camera["image_size"]),
        target=tuple(float(c) for c in center),
    )
