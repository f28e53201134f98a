"""The COCO-17 keypoint order shared by the renders' ground truth, the detector and the fit."""

COCO17_NAMES: tuple[str, ...] = (
    "nose",
    "left_eye",
    "right_eye",
    "left_ear",
    "right_ear",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
    "left_hip",
    "right_hip",
    "left_knee",
    "right_knee",
    "left_ankle",
    "right_ankle",
)

# COCO-WholeBody's points beyond COCO-17 (feet, face, hands; mmpose's names): a drift region may name them,
# and a region that needs one is NOT_RUN for a COCO-17 detector, never measured.
_FINGERS = ("thumb", "forefinger", "middle_finger", "ring_finger", "pinky_finger")
WHOLEBODY_EXTRA_NAMES: tuple[str, ...] = (
    ("left_big_toe", "left_small_toe", "left_heel", "right_big_toe", "right_small_toe", "right_heel")
    + tuple(f"face_{i}" for i in range(68))
    + tuple(n for side in ("left", "right") for n in
            (f"{side}_hand_root",) + tuple(f"{side}_{f}{k}" for f in _FINGERS for k in range(1, 5)))
)
KNOWN_JOINTS: tuple[str, ...] = COCO17_NAMES + WHOLEBODY_EXTRA_NAMES
