"""RF-DETR keypoint module: smoke checkpoint build, loading through pretrain_weights=, detection output."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("rfdetr")

from PIL import Image  # noqa: E402

from fourloops import keypoints as K  # noqa: E402

torch.set_num_threads(1)

SEED = 1234
# Small enough for a 2-core CPU: about 0.5 s an image at 192 px.
SHRINK = {"dec_layers": 1, "num_queries": 10, "resolution": 192}


@pytest.fixture(scope="session")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("kp") / "smoke-keypoints.pth"
    info = K.build_smoke_detector(str(out), seed=SEED, **SHRINK)
    return info


@pytest.fixture(scope="session")
def detector(smoke):
    return K.load_detector(smoke["path"])


@pytest.fixture(scope="session")
def image():
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(240, 320, 3), dtype=np.uint8)  # non-square: w=320, h=240
    return Image.fromarray(pixels, mode="RGB")


def test_sidecar_and_build_info(smoke):
    sidecar = json.loads(open(smoke["sidecar"], encoding="utf-8").read())
    assert smoke["sidecar"] == smoke["path"] + ".smoke.json"
    assert sidecar["model_set"] == "smoke"
    assert sidecar["seed"] == SEED
    assert sidecar["built_by"] == "fourloops.keypoints"
    for key, value in SHRINK.items():
        assert sidecar[key] == value
    assert sidecar["num_select"] == SHRINK["num_queries"]
    assert sidecar["weights_sha256"] == smoke["sha256"]


def test_checkpoint_is_rfdetr_format(smoke):
    from rfdetr.utilities.io import _safe_torch_load

    ckpt = _safe_torch_load(smoke["path"], trust=False)  # RF-DETR's own safe (weights_only) loader
    assert {"model", "args", "model_name", "model_config"} <= set(ckpt)
    assert ckpt["model_name"] == "RFDETRKeypointPreview"
    assert ckpt["model"]["class_embed.bias"].shape[0] == 2  # person + no-object, as the preview checkpoint
    assert ckpt["model_config"]["num_keypoints_per_class"] == [17]
    assert ckpt["model_config"]["dec_layers"] == SHRINK["dec_layers"]


def test_loads_via_pretrain_weights(detector, smoke):
    model = detector.rfdetr_model
    assert type(model).__name__ == "RFDETRKeypointPreview"
    assert model.model_config.pretrain_weights == smoke["path"]
    assert detector.constructor_kwargs["pretrain_weights"] == smoke["path"]
    assert detector.resolution == SHRINK["resolution"]
    assert model.model_config.dec_layers == SHRINK["dec_layers"]
    assert model.model_config.num_queries == SHRINK["num_queries"]


def test_checkpoint_round_trips(detector, smoke):
    ckpt = torch.load(smoke["path"], map_location="cpu", weights_only=False)
    loaded = detector.rfdetr_model.model.model.state_dict()
    assert set(loaded) == set(ckpt["model"])
    for key, value in ckpt["model"].items():
        assert torch.equal(loaded[key], value), key


def test_build_is_deterministic(smoke, tmp_path):
    again = K.build_smoke_detector(str(tmp_path / "again.pth"), seed=SEED, **SHRINK)
    assert again["sha256"] == smoke["sha256"]
    a = torch.load(smoke["path"], map_location="cpu", weights_only=False)["model"]
    b = torch.load(again["path"], map_location="cpu", weights_only=False)["model"]
    assert all(torch.equal(a[key], b[key]) for key in a)
    other = K.build_smoke_detector(str(tmp_path / "other.pth"), seed=SEED + 1, **SHRINK)
    assert other["sha256"] != smoke["sha256"]


def test_detect_output_in_image_frame(detector, image):
    out = detector.detect(image)
    width, height = image.size
    assert out["detected"] is True
    assert out["image_size"] == [width, height]
    assert 0.0 <= out["score"] <= 1.0
    x0, y0, x1, y1 = out["bbox"]
    assert 0.0 <= x0 <= x1 <= width and 0.0 <= y0 <= y1 <= height
    assert len(out["keypoints"]) == 17 and all(len(p) == 2 for p in out["keypoints"])
    assert len(out["keypoint_scores"]) == 17
    assert out["keypoint_names"] == list(K.COCO17_KEYPOINTS)
    assert out["keypoint_names"][0] == "nose" and out["keypoint_names"][16] == "right_ankle"
    assert all(math.isfinite(v) for p in out["keypoints"] for v in p)
    # Random weights put the points at the box centre: they are in pixels of this image, not the model input.
    xs = [p[0] for p in out["keypoints"]]
    ys = [p[1] for p in out["keypoints"]]
    assert x0 - 1 <= min(xs) and max(xs) <= x1 + 1 and y0 - 1 <= min(ys) and max(ys) <= y1 + 1
    json.dumps(out, allow_nan=True)


def test_detect_is_deterministic(detector, image, smoke):
    first = detector.detect(image)
    assert detector.detect(image) == first
    assert detector.detect(image.convert("RGBA")) == first  # converted to RGB, same pixels
    again = K.load_detector(smoke["path"])
    assert again.detect(image) == first


def test_detect_many_matches_detect(detector, image):
    flipped = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    many = detector.detect_many([image, flipped])
    assert many == [detector.detect(image), detector.detect(flipped)]


def test_describe(detector, smoke):
    info = detector.describe()
    assert info["class"] == "RFDETRKeypointPreview"
    assert info["weights"] == smoke["path"]
    assert info["weights_sha256"] == smoke["sha256"]
    assert info["resolution"] == SHRINK["resolution"] and info["num_windows"] == 2
    assert info["device"] == "cpu"
    assert info["parameter_count"] == smoke["parameter_count"] > 0
    json.dumps(info)


def test_resolution_override(smoke, image):
    det = K.load_detector(smoke["path"], resolution=144, num_windows=1)
    assert det.resolution == 144 and det.num_windows == 1
    out = det.detect(image)
    assert len(out["keypoints"]) == 17 and out["image_size"] == list(image.size)


def test_invalid_resolution(smoke):
    with pytest.raises(ValueError, match="divisible"):
        K.load_detector(smoke["path"], resolution=200)  # not a multiple of 12 * 2


def test_missing_weights(tmp_path):
    missing = tmp_path / "nowhere" / "rf-detr-keypoint-preview-xlarge.pth"
    with pytest.raises(FileNotFoundError) as info:
        K.load_detector(str(missing))
    assert str(missing) in str(info.value)
    assert "rf-detr-keypoint-preview-xlarge.pth" in str(info.value)
    assert not missing.exists() and not missing.parent.exists()  # nothing downloaded or created


def test_no_detection_record():
    out = K._no_detection(64, 48)
    assert out["detected"] is False and out["score"] == 0.0
    assert len(out["keypoints"]) == 17 and all(math.isnan(v) for p in out["keypoints"] for v in p)


def test_corrupt_checkpoint_is_not_redownloaded(tmp_path):
    # RF-DETR re-downloads a registry-named file that fails to load; fourloops must fail instead.
    bad = tmp_path / "rf-detr-keypoint-preview-xlarge.pth"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(Exception):
        K.load_detector(str(bad))
    assert bad.read_bytes() == b"not a checkpoint"


class _Detector:
    """The detector as a keypoints job calls it: each call noted (1 a one-image call, (images, batch_size) a
    batched one); `batched` says which kind the job must make."""

    load_seconds = 0.0

    def __init__(self, calls: list, batched: bool):
        self.calls, self.batched = calls, batched

    def detect(self, image):
        assert not self.batched, "a batched job called the detector one image at a time"
        self.calls.append(1)
        return {"keypoints": []}

    def detect_many(self, images, batch_size=1):
        assert self.batched, "a keypoints job of one image a call batched its images"
        self.calls.append((len(images), batch_size))
        return [{"keypoints": [], "n": len(self.calls)} for _ in images]

    def describe(self):
        return {}


def _keypoints_job(monkeypatch, tmp_path, n: int, batch: int) -> tuple[list, dict, list[Path]]:
    from fourloops.stages.keypoints import keypoints_stage

    calls = []
    monkeypatch.setattr(K, "load_detector", lambda *a, **k: _Detector(calls, batched=batch > 1))
    images = []
    for i in range(n):
        images.append(tmp_path / f"{i}.png")
        Image.new("RGB", (8, 8)).save(images[-1])
    outs = [tmp_path / f"{i}.json" for i in range(n)]
    rec = keypoints_stage([str(p) for p in images], [str(p) for p in outs], [30 * i for i in range(n)],
                          {"device": "cpu", "weights": "w", "resolution": 576, "num_windows": 1}, batch=batch)
    return calls, rec, outs


def test_a_keypoints_job_calls_the_detector_one_image_at_a_time(monkeypatch, tmp_path):
    # the walls fit the detector on each process's first call (bench/walls_fit.py AFTER_CALL): a job's every call must
    # be one size, so none runs on a pool that holds a smaller call's blocks
    calls, _, _ = _keypoints_job(monkeypatch, tmp_path, 3, batch=1)
    assert calls == [1, 1, 1]


def test_a_batched_keypoints_job_makes_its_largest_call_first_and_writes_every_image(monkeypatch, tmp_path):
    calls, rec, outs = _keypoints_job(monkeypatch, tmp_path, 5, batch=2)
    assert calls == [(2, 2), (2, 2), (1, 2)] and rec["batch"] == 2
    written = [json.loads(p.read_text()) for p in outs]
    assert [w["n"] for w in written] == [1, 1, 2, 2, 3] and [w["azimuth_requested"] for w in written] == [0, 30, 60, 90, 120]
