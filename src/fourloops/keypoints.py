"""RF-DETR keypoint detection: the most confident person in an image, as COCO-17 points.

One loader serves both model sets. The real model set uses RF-DETR's keypoint preview checkpoint
(``rf-detr-keypoint-preview-xlarge.pth``) at a path the user configures; the smoke model set uses a
random-initialised ``RFDETRKeypointPreview`` built offline by :func:`build_smoke_detector` and saved in
RF-DETR's own checkpoint format. Both are loaded by :func:`load_detector` through the same call,
``RFDETRKeypointPreview(pretrain_weights=<path>, ...)``, so the smoke set exercises the real code path.

Checkpoint format (what RF-DETR's ``pretrain_weights=`` loader and ``RFDETR.from_checkpoint`` read):
a ``torch.save`` dict with ``"model"`` (the ``LWDETR`` state dict), ``"args"`` (the model's build namespace,
a ``types.SimpleNamespace``), and, as RF-DETR's own training callbacks write them, ``"model_name"``
(``"RFDETRKeypointPreview"``), ``"model_config"`` (``ModelConfig.model_dump()`` without ``pretrain_weights``
and ``device``) and ``"rfdetr_version"``. The published preview checkpoint may lack ``model_config``; then
the class defaults apply. Where ``model_config`` is present, :func:`load_detector` restores the architecture
fields that differ from the class defaults (as ``from_checkpoint`` does), which is how a shrunk smoke model
loads with its own ``dec_layers`` / ``num_queries``; an unshrunk checkpoint gives exactly the constructor
call the real weights get.

Determinism: inference is a pure function of the weights and the image for a fixed torch thread count
(reduction order can change with the number of threads, so pin it, e.g. ``torch.set_num_threads(1)``).
"""

from __future__ import annotations

import contextlib
import copy
import errno
import logging
import math
import os
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from fourloops import io as fio

from fourloops.coco import COCO17_NAMES as COCO17_KEYPOINTS
NUM_KEYPOINTS = len(COCO17_KEYPOINTS)

REAL_CHECKPOINT_NAME = "rf-detr-keypoint-preview-xlarge.pth"
REAL_CHECKPOINT_URL = "https://storage.googleapis.com/rfdetr/rf-detr-keypoint-preview-xlarge.pth"

#: Config fields build_smoke_detector accepts as "shrink" options. All but resolution / num_windows change
#: weight shapes or the query count, so they are stored in the checkpoint's model_config and restored on load.
SHRINK_FIELDS: tuple[str, ...] = (
    "dec_layers",
    "num_queries",
    "num_select",
    "hidden_dim",
    "sa_nheads",
    "ca_nheads",
    "dec_n_points",
    "resolution",
    "num_windows",
)

#: model_config fields restored from a checkpoint when they differ from the class defaults. Deliberately not
#: positional_encoding_size (derived from resolution by the config, and interpolated on load), nor device /
#: pretrain_weights (the loading call supplies those), nor num_classes (RF-DETR aligns it from the head shape).
_RESTORED_FIELDS: tuple[str, ...] = (
    "encoder",
    "out_feature_indexes",
    "dec_layers",
    "two_stage",
    "projector_scale",
    "hidden_dim",
    "patch_size",
    "num_windows",
    "sa_nheads",
    "ca_nheads",
    "dec_n_points",
    "num_queries",
    "num_select",
    "postprocess_trace_alpha",
    "bbox_reparam",
    "lite_refpoint_refine",
    "layer_norm",
    "num_channels",
    "resolution",
    "group_detr",
    "use_grouppose_keypoints",
    "keypoint_cross_attn",
    "inter_instance_kp_attn",
    "grouppose_keypoint_dim_downscale",
    "dual_projector",
    "dual_projector_kp_only",
    "num_keypoints_per_class",
    "num_decoder_registers",
)

_MISSING_WEIGHTS_HELP = (
    "Keypoint weights not found at {path}. For the real model set, download RF-DETR's keypoint preview "
    "checkpoint ({name}, {url}) on a machine with network access and place it at exactly this path "
    "(fourloops never downloads weights). For the smoke model set, build a random-initialised stand-in with "
    "fourloops.keypoints.build_smoke_detector({path_repr}, seed=...)."
)


def _model_class():
    from rfdetr import RFDETRKeypointPreview

    return RFDETRKeypointPreview


def _config_defaults() -> dict[str, Any]:
    from rfdetr.config import RFDETRKeypointPreviewConfig

    return {name: field.default for name, field in RFDETRKeypointPreviewConfig.model_fields.items()}


def valid_resolution(resolution: int, patch_size: int = 12, num_windows: int = 2) -> bool:
    """RF-DETR needs a square input side divisible by patch_size * num_windows (12 * 2 = 24 by default)."""
    return resolution > 0 and resolution % (patch_size * num_windows) == 0


@contextlib.contextmanager
def _no_downloads() -> Iterator[None]:
    """Make RF-DETR's weight download a hard error for the duration (its loader retries a download on a bad file)."""
    import rfdetr.assets.model_weights as model_weights

    def _refuse(url: str, filename: str, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            f"fourloops refuses to download weights ({url} -> {filename}); place the checkpoint there yourself"
        )

    original = model_weights._download_file
    model_weights._download_file = _refuse
    try:
        yield
    finally:
        model_weights._download_file = original


class _PartialLoadCatcher(logging.Handler):
    """Collects RF-DETR's 'loaded only partially' warnings so a partial load can be made an error."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "loaded only partially" in message:
            self.messages.append(message)


def _read_checkpoint_metadata(path: str) -> dict[str, Any]:
    """The checkpoint's non-tensor entries (model_config, model_name, args), reading tensors lazily (mmap)."""
    import argparse
    import types

    import torch

    with torch.serialization.safe_globals([argparse.Namespace, types.SimpleNamespace]):
        try:
            ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:
            # Legacy (non-zip) files cannot be memory-mapped.
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(ckpt, dict) or not ("model" in ckpt or "state_dict" in ckpt):
        raise ValueError(f"{path} is not an RF-DETR checkpoint (expected a dict with a 'model' entry)")
    meta = {key: ckpt[key] for key in ("model_config", "model_name", "args", "rfdetr_version") if key in ckpt}
    state = ckpt.get("model") or {}
    meta["state_keys"] = len(state)
    del ckpt
    return meta


class Detector:
    """A loaded RF-DETR keypoint model. Use :func:`load_detector` to make one."""

    def __init__(self, model: Any, weights: str, device: str, constructor_kwargs: dict[str, Any], load_seconds: float):
        self._model = model
        self.weights = weights
        self.device = device
        self.constructor_kwargs = dict(constructor_kwargs)
        self.load_seconds = load_seconds
        self._sha256: str | None = None
        args = model.model.args
        schema = [int(n) for n in (getattr(args, "num_keypoints_per_class", None) or [])]
        #: class slots whose keypoint schema is COCO-17 (slot 0 for the active-first preview schema [17]).
        self.person_labels = frozenset(i for i, n in enumerate(schema) if n == NUM_KEYPOINTS)
        if not self.person_labels:
            raise ValueError(f"{weights}: keypoint schema {schema} has no COCO-17 class; not a COCO keypoint model")
        # predict() warns once that the model is not optimised; that is expected for CPU fp32 inference.
        model._has_warned_about_not_being_optimized_for_inference = True

    @property
    def resolution(self) -> int:
        return int(self._model.model.resolution)

    @property
    def num_windows(self) -> int:
        return int(self._model.model_config.num_windows)

    @property
    def rfdetr_model(self) -> Any:
        """The underlying ``rfdetr.RFDETRKeypointPreview``."""
        return self._model

    def parameter_count(self) -> int:
        return int(sum(p.numel() for p in self._model.model.model.parameters()))

    def describe(self) -> dict[str, Any]:
        if self._sha256 is None:
            self._sha256 = fio.sha256_file(self.weights)
        config = self._model.model_config
        return {
            "class": type(self._model).__name__,
            "weights": self.weights,
            "weights_sha256": self._sha256,
            "resolution": self.resolution,
            "num_windows": self.num_windows,
            "patch_size": int(config.patch_size),
            "dec_layers": int(config.dec_layers),
            "num_queries": int(config.num_queries),
            "num_select": int(config.num_select),
            "num_classes": int(config.num_classes),
            "num_keypoints_per_class": [int(n) for n in config.num_keypoints_per_class],
            "device": self.device,
            "parameter_count": self.parameter_count(),
            "keypoint_names": list(COCO17_KEYPOINTS),
            "constructor_kwargs": {k: v for k, v in self.constructor_kwargs.items() if k != "pretrain_weights"},
        }

    def detect(self, image: Any) -> dict[str, Any]:
        """The single most confident person in ``image`` (a PIL image), in its pixel coordinates."""
        return self.detect_many([image], batch_size=1)[0]

    def detect_many(self, images: Iterable[Any], batch_size: int = 1) -> list[dict[str, Any]]:
        """:meth:`detect` over many images. ``batch_size`` > 1 runs them through the model together: slightly
        less CPU time per image, but the last bits of the output may differ from a one-image call."""
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        prepared = [_as_rgb(image) for image in images]
        results: list[dict[str, Any]] = []
        for start in range(0, len(prepared), batch_size):
            chunk = prepared[start : start + batch_size]
            predictions = self._model.predict(chunk, threshold=-1.0, include_source_image=False)
            results.extend(self._best_person(pred, img.size) for pred, img in zip(predictions, chunk))
        return results

    def _best_person(self, pred: Any, size: tuple[int, int]) -> dict[str, Any]:
        import numpy as np

        width, height = int(size[0]), int(size[1])
        scores = np.asarray(pred.detection_confidence if pred.detection_confidence is not None else [], dtype=np.float64)
        labels = np.asarray(pred.class_id if pred.class_id is not None else [], dtype=np.int64)
        candidates = np.flatnonzero(np.isin(labels, sorted(self.person_labels)) & np.isfinite(scores))
        if candidates.size == 0:
            return _no_detection(width, height, len(scores))
        best = int(candidates[np.argmax(scores[candidates])])  # argmax: first of equal scores, deterministic
        xy = np.asarray(pred.xy[best][:NUM_KEYPOINTS], dtype=np.float64)
        kp_scores = np.asarray(pred.keypoint_confidence[best][:NUM_KEYPOINTS], dtype=np.float64)
        bbox = np.asarray(pred.data["xyxy"][best], dtype=np.float64)
        return {
            "detected": True,
            "score": float(scores[best]),
            "bbox": [float(v) for v in bbox],
            "keypoints": [[float(x), float(y)] for x, y in xy],
            "keypoint_scores": [float(s) for s in kp_scores],
            "keypoint_names": list(COCO17_KEYPOINTS),
            "image_size": [width, height],
            "label": int(labels[best]),
            "num_candidates": int(candidates.size),
        }


def _as_rgb(image: Any) -> Any:
    from PIL import Image

    if not isinstance(image, Image.Image):
        raise TypeError(f"expected a PIL.Image.Image, got {type(image).__name__}")
    return image if image.mode == "RGB" else image.convert("RGB")


def _no_detection(width: int, height: int, num_candidates: int = 0) -> dict[str, Any]:
    nan = math.nan
    return {
        "detected": False,
        "score": 0.0,
        "bbox": [nan, nan, nan, nan],
        "keypoints": [[nan, nan] for _ in range(NUM_KEYPOINTS)],
        "keypoint_scores": [0.0] * NUM_KEYPOINTS,
        "keypoint_names": list(COCO17_KEYPOINTS),
        "image_size": [width, height],
        "label": -1,
        "num_candidates": int(num_candidates),
    }


def _exempt_position_embedding() -> None:
    """RF-DETR's sine position embedding takes a cumulative sum of the padding mask in float32, which torch's
    determinism check refuses on CUDA (a float cumsum's order of additions may vary). The mask is boolean: every
    partial sum is a whole number below 2**24, exact in float32 in any order, so the call runs with the check off
    (fourloops.determinism.exempt_calls; the job's record names it)."""
    from fourloops import determinism

    try:
        from rfdetr.models.position_encoding import PositionEmbeddingSine
    except ImportError:  # another rfdetr layout: nothing to exempt, and torch names any op it refuses
        return
    determinism.exempt_calls(PositionEmbeddingSine, "_compute", "rfdetr PositionEmbeddingSine._compute",
                             "float32 cumsum of a boolean mask: whole numbers below 2**24, exact in any order")


def load_detector(
    weights: str | os.PathLike,
    device: str = "cpu",
    resolution: int | None = None,
    num_windows: int | None = None,
    *,
    strict: bool = True,
    **kwargs: Any,
) -> Detector:
    """Load RF-DETR keypoint weights (real or smoke) from a local checkpoint file; never downloads.

    ``resolution`` / ``num_windows`` override the inference input side and backbone window count (the side must
    be divisible by 12 * num_windows). Other ``kwargs`` go to ``RFDETRKeypointPreview`` (ModelConfig fields).
    With ``strict`` a checkpoint that loads only partially (RF-DETR's own check) is an error, not a warning.
    """
    path = Path(os.path.expanduser(os.fspath(weights)))
    if not path.is_file():
        raise FileNotFoundError(
            errno.ENOENT,
            _MISSING_WEIGHTS_HELP.format(
                path=str(path), path_repr=repr(str(path)), name=REAL_CHECKPOINT_NAME, url=REAL_CHECKPOINT_URL
            ),
            str(path),
        )
    # Absolute path: RF-DETR maps a bare file name into its download cache directory instead.
    path_str = os.path.realpath(path)
    _exempt_position_embedding()
    start = time.perf_counter()
    meta = _read_checkpoint_metadata(path_str)
    defaults = _config_defaults()
    constructor: dict[str, Any] = {}
    saved_config = meta.get("model_config")
    if isinstance(saved_config, dict):
        for name in _RESTORED_FIELDS:
            if name in saved_config and saved_config[name] != defaults.get(name):
                constructor[name] = saved_config[name]
    if resolution is not None:
        constructor["resolution"] = int(resolution)
    if num_windows is not None:
        constructor["num_windows"] = int(num_windows)
    constructor.update(kwargs)
    side = int(constructor.get("resolution", defaults["resolution"]))
    windows = int(constructor.get("num_windows", defaults["num_windows"]))
    patch = int(constructor.get("patch_size", defaults["patch_size"]))
    if not valid_resolution(side, patch, windows):
        raise ValueError(
            f"resolution {side} is not divisible by patch_size * num_windows = {patch} * {windows} = {patch * windows}"
        )
    constructor["pretrain_weights"] = path_str
    constructor["device"] = device

    catcher = _PartialLoadCatcher()
    rf_logger = logging.getLogger("rf-detr")
    rf_logger.addHandler(catcher)
    try:
        with _no_downloads():
            model = _model_class()(**constructor)
    finally:
        rf_logger.removeHandler(catcher)
    if strict and catcher.messages:
        raise RuntimeError(f"{path_str} loaded only partially into RFDETRKeypointPreview: {catcher.messages[0]}")
    model.model.model.eval()
    return Detector(model, path_str, device, constructor, time.perf_counter() - start)


def _is_zero_output_head(name: str, param: Any) -> bool:
    """The last layer of a box / keypoint MLP head that RF-DETR initialised to zero."""
    import torch

    return (
        name.endswith("layers.2.weight")
        and ("bbox_embed" in name or "keypoint_embed" in name)
        and not bool(torch.count_nonzero(param))
    )


def build_smoke_detector(
    out_path: str | os.PathLike, seed: int, *, head_init_std: float = 0.0, model_set: str = "smoke", **shrink: Any
) -> dict[str, Any]:
    """Build a random-initialised RFDETRKeypointPreview offline and save it where ``pretrain_weights=`` can load it.

    ``shrink`` takes fields from :data:`SHRINK_FIELDS`, e.g. ``dec_layers=1, num_queries=10, resolution=192``.
    ``num_select`` follows ``num_queries`` unless given. The head is one class (person) with the COCO-17 keypoint
    schema, the layout of the published preview checkpoint. Also writes ``<out_path>.smoke.json``.
    The same seed and shrink give identical tensors (and identical file bytes).

    RF-DETR zero-initialises its box and keypoint output layers, so a freshly built model puts all 17 keypoints
    on the box centre. ``head_init_std`` > 0 redraws those all-zero output weights from N(0, std) (same seed),
    spreading the points a little (0.02: a pixel or two in a 20 px box; 0.1 already gives NaN scores, i.e. no
    detection). The default 0.0 keeps RF-DETR's own initialisation. ``model_set`` is what the checkpoint and its
    sidecar record (the sizing set builds the unshrunk architecture through here: fourloops.sizing).
    """
    import torch

    unknown = sorted(set(shrink) - set(SHRINK_FIELDS))
    if unknown:
        raise ValueError(f"unknown shrink option(s) {unknown}; accepted: {list(SHRINK_FIELDS)}")
    shrink = dict(shrink)
    if "num_queries" in shrink and "num_select" not in shrink:
        shrink["num_select"] = int(shrink["num_queries"])
    defaults = _config_defaults()
    side = int(shrink.get("resolution", defaults["resolution"]))
    windows = int(shrink.get("num_windows", defaults["num_windows"]))
    if not valid_resolution(side, defaults["patch_size"], windows):
        raise ValueError(f"resolution {side} is not divisible by {defaults['patch_size']} * {windows}")

    from rfdetr.config import PretrainWeightsCompatibilityWarning
    from rfdetr.utilities.package import get_version

    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PretrainWeightsCompatibilityWarning)
            model = _model_class()(pretrain_weights=None, num_classes=1, device="cpu", **shrink)
        module = model.model.model
        if head_init_std:
            with torch.no_grad():
                for name, param in module.named_parameters():
                    if _is_zero_output_head(name, param):
                        param.normal_(0.0, float(head_init_std))
    state = {key: value.detach().clone().contiguous() for key, value in module.state_dict().items()}

    args = copy.copy(model.model.args)
    args.dataset_dir = None
    args.output_dir = "output"
    args.resume = ""
    args.device = "cpu"
    args.pretrain_weights = None
    args.class_names = ["person"]
    model_config = {
        key: value for key, value in model.model_config.model_dump().items() if key not in ("pretrain_weights", "device")
    }
    payload = {
        "model": state,
        "args": args,
        "model_name": type(model).__name__,
        "model_config": model_config,
        "rfdetr_version": get_version(),
        "fourloops": {"model_set": model_set, "seed": int(seed), "shrink": dict(shrink), "head_init_std": head_init_std},
    }
    out = Path(out_path)
    with fio.atomic_path(out) as tmp, open(tmp, "wb") as fh:
        # A file object, not a path: torch.save names the archive's root folder after a path's stem, and the
        # temporary name is random, so saving by path would make the bytes differ between identical builds.
        torch.save(payload, fh)
    build_seconds = time.perf_counter() - start
    parameter_count = int(sum(p.numel() for p in module.parameters()))
    sidecar = {
        "model_set": model_set,
        "seed": int(seed),
        "built_by": "fourloops.keypoints",
        "class": type(model).__name__,
        "rfdetr_version": get_version(),
        "torch_version": torch.__version__,
        "parameter_count": parameter_count,
        "head_init_std": float(head_init_std),
        "weights_sha256": fio.sha256_file(out),
        **dict(sorted(shrink.items())),
        "shrink": dict(sorted(shrink.items())),
    }
    sidecar_path = Path(f"{out}.smoke.json")
    fio.write_json(sidecar_path, sidecar)
    return {
        "path": str(out),
        "sidecar": str(sidecar_path),
        "sha256": sidecar["weights_sha256"],
        "seed": int(seed),
        "shrink": dict(sorted(shrink.items())),
        "head_init_std": float(head_init_std),
        "parameter_count": parameter_count,
        "build_seconds": build_seconds,
    }


__all__: Sequence[str] = (
    "COCO17_KEYPOINTS",
    "NUM_KEYPOINTS",
    "SHRINK_FIELDS",
    "Detector",
    "build_smoke_detector",
    "load_detector",
    "valid_resolution",
)
