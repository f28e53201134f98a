"""The Anny body: a phenotype and a pose in, a posed mesh and its COCO-17 joints out.

World frame (the one `fourloops.camera` assumes): Anny's axes, metres, Z up, the body faces -Y,
+X is the body's left. fourloops then translates the posed body so that its lowest vertex lies on
the ground plane z = 0; x and y keep Anny's placement (the root bone's reference head on the
z axis).

Phenotype: Anny's default phenotype parameters (`phenotype_keys()`), each in [0, 1]; missing keys
take Anny's default 0.5. Age anchors: 0 baby, 1/3 child, 2/3 young adult, 1 old.

Pose: bone name -> [rx, ry, rz] in degrees, relative to Anny's reference pose (its rest A-pose,
arms about 50 degrees below horizontal; it differs from the mesh's modelled rest pose by under a
centimetre). The angles are extrinsic X-then-Y-then-Z rotations about world-aligned axes through
the bone's head (Anny's "local-ref" pose parameterization), applied before the parent bones'
rotations, so a child bone turns with its parents. Examples: "upperarm01.L": [0, +20, 0] lowers
the left arm by 20 degrees, "upperarm01.R": [0, -20, 0] lowers the right one, "lowerarm01.R":
[-30, 0, 0] bends the right elbow forwards, "upperleg01.L": [-20, 0, 0] swings the left leg
forwards.

The Anny model is built once per process (the first build in a fresh cache directory took
220-290 s on a busy 2-core machine and writes ~790 MB; later loads take ~0.2 s after a ~2 s `import anny`).
The cache directory is $ANNY_CACHE_DIR (the variable anny itself reads), else
~/.cache/fourloops/anny (`anny_cache_dir()`); fourloops passes it to anny explicitly.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from fourloops.coco import COCO17_NAMES

# anny 0.6.2, Anny(phenotypes="default").phenotype_labels; each value in [0, 1], default 0.5.
_PHENOTYPE_KEYS: tuple[str, ...] = ("gender", "age", "muscle", "weight", "height", "proportions")
PHENOTYPE_RANGE: tuple[float, float] = (0.0, 1.0)

# anny 0.6.2, Anny(rig="anny").bone_labels, in the model's order (tests check they still match).
_BONE_NAMES: tuple[str, ...] = (
    "root", "pelvis.L", "upperleg01.L", "upperleg02.L", "lowerleg01.L", "lowerleg02.L", "foot.L",
    "toe1-1.L", "toe1-2.L", "toe2-1.L", "toe2-2.L", "toe2-3.L", "toe3-1.L", "toe3-2.L", "toe3-3.L",
    "toe4-1.L", "toe4-2.L", "toe4-3.L", "toe5-1.L", "toe5-2.L", "toe5-3.L", "pelvis.R",
    "upperleg01.R", "upperleg02.R", "lowerleg01.R", "lowerleg02.R", "foot.R", "toe1-1.R",
    "toe1-2.R", "toe2-1.R", "toe2-2.R", "toe2-3.R", "toe3-1.R", "toe3-2.R", "toe3-3.R", "toe4-1.R",
    "toe4-2.R", "toe4-3.R", "toe5-1.R", "toe5-2.R", "toe5-3.R", "spine05", "spine04", "spine03",
    "spine02", "spine01", "clavicle.L", "shoulder01.L", "upperarm01.L", "upperarm02.L",
    "lowerarm01.L", "lowerarm02.L", "wrist.L", "finger1-1.L", "finger1-2.L", "finger1-3.L",
    "metacarpal1.L", "finger2-1.L", "finger2-2.L", "finger2-3.L", "metacarpal2.L", "finger3-1.L",
    "finger3-2.L", "finger3-3.L", "metacarpal3.L", "finger4-1.L", "finger4-2.L", "finger4-3.L",
    "metacarpal4.L", "finger5-1.L", "finger5-2.L", "finger5-3.L", "clavicle.R", "shoulder01.R",
    "upperarm01.R", "upperarm02.R", "lowerarm01.R", "lowerarm02.R", "wrist.R", "finger1-1.R",
    "finger1-2.R", "finger1-3.R", "metacarpal1.R", "finger2-1.R", "finger2-2.R", "finger2-3.R",
    "metacarpal2.R", "finger3-1.R", "finger3-2.R", "finger3-3.R", "metacarpal3.R", "finger4-1.R",
    "finger4-2.R", "finger4-3.R", "metacarpal4.R", "finger5-1.R", "finger5-2.R", "finger5-3.R",
    "neck01", "neck02", "neck03", "head", "eye.L", "eye.R",
)

# A young adult of average build.
DEFAULT_PHENOTYPE: dict[str, float] = {
    "gender": 0.35,
    "age": 0.7,
    "muscle": 0.5,
    "weight": 0.5,
    "height": 0.5,
    "proportions": 0.5,
}

# Relaxed standing with a short step, deliberately not left/right symmetric: the left arm hangs
# about 65 degrees below horizontal (60-65 degrees down from a T-pose), the right one a little less
# with the elbow bent so the forearm points forwards, about level, the left leg steps forwards and its knee bends, the
# right leg trails slightly, the head turns a little to the body's left.
DEFAULT_POSE: dict[str, list[float]] = {
    "upperarm01.L": [0.0, 18.0, 0.0],
    "lowerarm01.L": [-10.0, 0.0, 0.0],
    "upperarm01.R": [-8.0, -12.0, 0.0],
    "lowerarm01.R": [-30.0, 0.0, 0.0],
    "upperleg01.L": [-18.0, 0.0, 0.0],
    "lowerleg01.L": [12.0, 0.0, 0.0],
    "upperleg01.R": [8.0, 0.0, 0.0],
    "neck01": [0.0, 0.0, 8.0],
}


def anny_cache_dir() -> Path:
    """Where Anny's built model data lives: $ANNY_CACHE_DIR, else ~/.cache/fourloops/anny."""
    return Path(os.environ.get("ANNY_CACHE_DIR") or Path.home() / ".cache" / "fourloops" / "anny")


def phenotype_keys() -> list[str]:
    """The phenotype parameters `build_body` accepts (each in `PHENOTYPE_RANGE`)."""
    return list(_PHENOTYPE_KEYS)


def bone_names() -> list[str]:
    """The bones a pose may rotate, in Anny's order."""
    return list(_BONE_NAMES)


@dataclass(frozen=True, eq=False)
class Body:
    """A posed Anny body in world coordinates (arrays are read-only)."""

    vertices: np.ndarray  # (V, 3) float64, metres
    faces: np.ndarray  # (F, 3) int64, indices into vertices, counter-clockwise seen from outside
    keypoints3d: np.ndarray  # (17, 3) float64, COCO-17 order (COCO17_NAMES)
    center: np.ndarray  # (3,) float64, centre of the vertices' axis-aligned bounding box
    height_m: float  # stature: vertical extent of the same phenotype in the reference (rest) pose


# ------------------------------------------------------------------------------------- validation
def _check_phenotype(phenotype: Mapping[str, Any]) -> dict[str, float]:
    if not isinstance(phenotype, Mapping):
        raise ValueError(f"phenotype must be a mapping of {list(_PHENOTYPE_KEYS)} to numbers, got {type(phenotype).__name__}")
    lo, hi = PHENOTYPE_RANGE
    out = {}
    for key, value in phenotype.items():
        if key not in _PHENOTYPE_KEYS:
            raise ValueError(f"unknown phenotype key {key!r}; allowed: {list(_PHENOTYPE_KEYS)}")
        try:
            val = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"phenotype {key!r} must be a number, got {value!r}") from None
        if not (lo <= val <= hi):
            raise ValueError(f"phenotype {key!r} = {val} is outside [{lo}, {hi}]")
        out[key] = val
    return out


def _check_pose(pose: Mapping[str, Any]) -> dict[str, tuple[float, float, float]]:
    if not isinstance(pose, Mapping):
        raise ValueError(f"pose must be a mapping of bone name to [rx, ry, rz] degrees, got {type(pose).__name__}")
    out = {}
    for bone, angles in pose.items():
        if bone not in _BONE_NAMES:
            raise ValueError(f"unknown bone {bone!r}; allowed: {list(_BONE_NAMES)}")
        try:
            vals = tuple(float(a) for a in angles)
        except (TypeError, ValueError):
            raise ValueError(f"pose[{bone!r}] must be [rx, ry, rz] in degrees, got {angles!r}") from None
        if len(vals) != 3 or not all(math.isfinite(a) for a in vals):
            raise ValueError(f"pose[{bone!r}] must be three finite angles [rx, ry, rz] in degrees, got {angles!r}")
        out[bone] = vals
    return out


def euler_xyz_deg_to_matrix(angles_deg) -> np.ndarray:
    """Extrinsic X, then Y, then Z rotation (degrees) as a 3x3 matrix: Rz @ Ry @ Rx."""
    rx, ry, rz = (math.radians(float(a)) for a in angles_deg)
    cx, sx, cy, sy, cz, sz = math.cos(rx), math.sin(rx), math.cos(ry), math.sin(ry), math.cos(rz), math.sin(rz)
    mx = np.array([[1.0, 0.0, 0.0], [0.0, cx, -sx], [0.0, sx, cx]])
    my = np.array([[cy, 0.0, sy], [0.0, 1.0, 0.0], [-sy, 0.0, cy]])
    mz = np.array([[cz, -sz, 0.0], [sz, cz, 0.0], [0.0, 0.0, 1.0]])
    return mz @ my @ mx


# ------------------------------------------------------------------------------------------ model
@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Run torch on `n` threads (fixed reduction order: the same arrays in every process), then restore."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def drop_damaged_cache_files(cache: Path) -> list[Path]:
    """Remove the cache's safetensors files whose header does not read or whose tensors run past the
    file's end (a build killed mid-write, a full disk): anny then rebuilds them. Reads headers only."""
    import logging

    from fourloops.filecheck import safetensors_problem

    dropped = []
    for file in sorted(cache.rglob("*.safetensors")):
        why = safetensors_problem(file)
        if why:
            logging.getLogger("fourloops.body").warning("Anny cache file %s is damaged (%s): removed, anny rebuilds it",
                                                        file, why)
            file.unlink()
            dropped.append(file)
    return dropped


@functools.lru_cache(maxsize=1)
def _model():
    """The Anny model and its COCO-17 regressor, built once per process.

    Dense torch linear-blend skinning ("lbs") rather than anny's default Warp kernel: no JIT
    compilation or kernel cache, and plain torch arithmetic. The first build in a cache directory
    holds an exclusive file lock so parallel jobs do not write the same cache file at once.
    """
    import fcntl

    import anny
    import anny.paths

    # anny reads ANNY_CACHE_DIR once, when first imported; set the path explicitly so an earlier
    # `import anny` elsewhere (env unset then) cannot send the ~790 MB build to ~/.cache/anny.
    cache = anny_cache_dir()
    anny.paths.set_anny_cache_path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".fourloops-build.lock", "w") as lock, _torch_threads(1):
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            drop_damaged_cache_files(cache)  # anny rebuilds what is missing; a truncated file would crash it
            model = anny.Anny(skinning_method="lbs")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    model.eval()
    if tuple(model.phenotype_labels) != _PHENOTYPE_KEYS or tuple(model.bone_labels) != _BONE_NAMES:
        raise RuntimeError("this anny version's phenotype or bone labels differ from fourloops.body's lists")
    regressor = anny.KeypointsRegressor.coco(model, labels=list(COCO17_NAMES))
    faces = model.get_triangular_faces().cpu().numpy().astype(np.int64)
    faces.setflags(write=False)
    return model, regressor, faces


def _forward(model, regressor, phenotype: dict[str, float], pose: dict[str, tuple[float, float, float]]):
    import torch

    dtype, device = model.dtype, model.device
    deltas = torch.eye(4, dtype=dtype, device=device).repeat(1, len(_BONE_NAMES), 1, 1)
    for bone, angles in pose.items():
        deltas[0, _BONE_NAMES.index(bone), :3, :3] = torch.as_tensor(
            euler_xyz_deg_to_matrix(angles), dtype=dtype, device=device
        )
    kwargs = {k: torch.tensor([v], dtype=dtype, device=device) for k, v in phenotype.items()}
    with torch.no_grad():
        out = model(pose_parameters=deltas, phenotype_kwargs=kwargs)
        keypoints = regressor(out)
    return out["vertices"][0].cpu().numpy().astype(np.float64), keypoints[0].cpu().numpy().astype(np.float64)


def build_body(phenotype: Mapping[str, Any], pose: Mapping[str, Any]) -> Body:
    """Pose Anny and return its world mesh and COCO-17 joints (deterministic: same inputs, same arrays).

    Raises ValueError for an unknown phenotype key or bone, naming it and listing the allowed ones.
    """
    phen = _check_phenotype(phenotype)
    rot = _check_pose(pose)
    model, regressor, faces = _model()
    with _torch_threads(1):
        vertices, keypoints = _forward(model, regressor, phen, rot)
        rest_vertices, _ = _forward(model, regressor, phen, {}) if rot else (vertices, None)
    ground = vertices[:, 2].min()
    vertices = vertices - np.array([0.0, 0.0, ground])
    keypoints = keypoints - np.array([0.0, 0.0, ground])
    center = (vertices.min(axis=0) + vertices.max(axis=0)) / 2.0
    height = float(rest_vertices[:, 2].max() - rest_vertices[:, 2].min())
    for arr in (vertices, keypoints, center):
        arr.setflags(write=False)
    return Body(vertices=vertices, faces=faces, keypoints3d=keypoints, center=center, height_m=height)


def anny_tables() -> dict:
    """Anny's tables (fourloops.anny_tables) from the installed anny (builds the model from its cache).

    A phenotype's allowed range is Anny's interpolation anchors' span cut to the range
    build_body accepts, so a value the config check passes is one the render takes.
    """
    import importlib.metadata

    import torch
    from anny.models.phenotype import make_phenotype_anchors

    model, _, _ = _model()
    anchors = make_phenotype_anchors(torch.float64)
    lo_body, hi_body = PHENOTYPE_RANGE
    phenotype = {}
    for label in model.phenotype_labels:
        lo, hi = round(float(anchors[label].min()), 12), round(float(anchors[label].max()), 12)
        phenotype[label] = {"min": max(lo, lo_body), "max": min(hi, hi_body), "anny_anchors": [lo, hi]}
    return {
        "anny_version": importlib.metadata.version("anny"),
        "phenotype": phenotype,
        "bones": [str(b) for b in model.bone_labels],
    }


def write_anny_tables(path: str | Path | None = None) -> Path:
    """Regenerate the table file (atomically: a temporary file renamed over it)."""
    import json
    import tempfile

    from fourloops.anny_tables import TABLE_PATH

    path = Path(path or TABLE_PATH)
    text = json.dumps(anny_tables(), indent=1) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


if __name__ == "__main__":
    import sys

    print(write_anny_tables(sys.argv[1] if len(sys.argv) > 1 else None))
