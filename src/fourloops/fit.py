"""Recover the camera azimuth from 2D COCO-17 keypoints by fitting the known Anny skeleton.

The body's shape and pose are known (the renders were made from them), and so is the camera
(distance, elevation, focal length). What a generator changes is where the body sits in the frame
and how large it is, so for each candidate yaw the projected skeleton is matched to the observed
points by a 2D scale and shift solved in closed form (weighted least squares). A coarse search over
the full circle finds the basin, a bounded scalar search refines it. The similarity has a positive
scale and no reflection, so COCO's left/right labels decide between a view and its mirror
(front against back).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from fourloops.camera import OrbitCamera, wrap_deg

MIN_POINTS = 5  # fewer weighted points than this cannot pin a yaw plus scale and shift


@dataclass(frozen=True)
class FitResult:
    azimuth_deg: float  # in [0, 360); NaN when the fit was not possible
    residual: float  # weighted RMS reprojection error / RMS spread of the observed points
    residual_px: float  # weighted RMS reprojection error in pixels
    confidence: float  # 1 - best residual / best residual of the runner-up basin, in [0, 1]
    runner_up_deg: float  # the best yaw outside the winning basin
    scale: float
    points_used: int
    reason: str = ""  # why the fit is NaN, if it is

    def as_dict(self) -> dict:
        return asdict(self)


def _align(proj: np.ndarray, obs: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Best scale s > 0 and shift t with s*proj + t ~ obs, for a batch (K, N, 2) of projections.

    Returns the weighted mean squared error per candidate and the scales."""
    wsum = w.sum()
    p_mean = (w[None, :, None] * proj).sum(axis=1) / wsum  # (K, 2)
    q_mean = (w[:, None] * obs).sum(axis=0) / wsum  # (2,)
    pc = proj - p_mean[:, None, :]
    qc = obs - q_mean[None, :]
    num = (w[None, :, None] * pc * qc[None]).sum(axis=(1, 2))
    den = (w[None, :, None] * pc * pc).sum(axis=(1, 2))
    scale = np.where(den > 0, num / np.maximum(den, 1e-12), 0.0)
    scale = np.maximum(scale, 0.0)  # no reflection: a mirrored match is not allowed to win
    resid = scale[:, None, None] * pc - qc[None]
    mse = (w[None, :, None] * resid * resid).sum(axis=(1, 2)) / wsum
    return mse, scale


def _project_many(camera: OrbitCamera, points3d: np.ndarray, azimuths: np.ndarray) -> np.ndarray:
    return np.stack([camera.project(points3d, float(a))[0] for a in azimuths])


def fit_azimuth(
    keypoints2d,
    weights,
    skeleton3d,
    camera: OrbitCamera,
    grid_step_deg: float = 2.0,
    basin_deg: float = 30.0,
) -> FitResult:
    """Fit the yaw of `skeleton3d` (17, 3) that best explains `keypoints2d` (17, 2) under `camera`.

    `weights` (17,) are per-point confidences; zero or NaN excludes a point. Points that are NaN are
    excluded too.
    """
    obs = np.asarray(keypoints2d, dtype=float)
    w = np.asarray(weights, dtype=float).copy()
    pts = np.asarray(skeleton3d, dtype=float)
    if obs.shape != pts[:, :2].shape or w.shape != (pts.shape[0],):
        raise ValueError(
            f"shape mismatch: keypoints2d {obs.shape}, weights {w.shape}, skeleton3d {pts.shape}"
        )
    bad = ~np.isfinite(obs).all(axis=1) | ~np.isfinite(w) | (w <= 0)
    w[bad] = 0.0
    used = int((w > 0).sum())
    if used < MIN_POINTS:
        nan = float("nan")
        return FitResult(nan, nan, nan, 0.0, nan, nan, used, f"only {used} usable keypoints (< {MIN_POINTS})")
    obs = np.where(bad[:, None], 0.0, obs)

    grid = np.arange(0.0, 360.0, grid_step_deg)
    mse, _ = _align(_project_many(camera, pts, grid), obs, w)
    best = int(np.argmin(mse))

    def cost(az: float) -> float:
        return float(_align(_project_many(camera, pts, np.array([az])), obs, w)[0][0])

    refined = minimize_scalar(
        cost,
        bounds=(grid[best] - grid_step_deg, grid[best] + grid_step_deg),
        method="bounded",
        options={"xatol": 1e-3},
    )
    az = round(float(refined.x), 4) % 360.0
    best_mse, scale = _align(_project_many(camera, pts, np.array([az])), obs, w)

    # The runner-up: the best candidate outside the winning basin.
    far = np.abs(wrap_deg(grid - az)) > basin_deg
    runner_idx = int(np.argmin(np.where(far, mse, np.inf)))
    runner_mse = float(mse[runner_idx])
    rmse = math.sqrt(max(float(best_mse[0]), 0.0))
    runner_rmse = math.sqrt(max(runner_mse, 0.0))
    confidence = 0.0 if runner_rmse <= 0 else float(np.clip(1.0 - rmse / runner_rmse, 0.0, 1.0))

    q_mean = (w[:, None] * obs).sum(axis=0) / w.sum()
    spread = math.sqrt(float((w * ((obs - q_mean) ** 2).sum(axis=1)).sum() / w.sum()))
    residual = rmse / spread if spread > 0 else float("nan")
    return FitResult(
        azimuth_deg=az,
        residual=residual,
        residual_px=rmse,
        confidence=confidence,
        runner_up_deg=float(grid[runner_idx]),
        scale=float(scale[0]),
        points_used=used,
    )
