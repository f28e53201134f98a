"""The Anny body and its renders: ground truth for everything downstream (desk)."""

from __future__ import annotations

from fourloops.io import write_json


def body_from(body: dict):
    from fourloops.body import DEFAULT_PHENOTYPE, DEFAULT_POSE, build_body

    return build_body({**DEFAULT_PHENOTYPE, **body.get("phenotype", {})}, {**DEFAULT_POSE, **body.get("pose", {})})


def render_stage(
    skeleton_out: str,
    images_out: list[str],
    keypoints_out: list[str],
    azimuths: list[int],
    body: dict,
    camera: dict,
    background,
) -> dict:
    """Build the body once; write its skeleton (3D COCO-17 joints, camera target) and render every
    azimuth with its ground-truth keypoints (pixels, COCO visibility)."""
    from fourloops.body import COCO17_NAMES
    from fourloops.camera import camera_from
    from fourloops.io import save_image
    from fourloops.render import Renderer

    if not (len(images_out) == len(keypoints_out) == len(azimuths)):
        raise ValueError(f"{len(images_out)} images, {len(keypoints_out)} keypoint files, {len(azimuths)} azimuths")
    b = body_from(body)
    center = [float(c) for c in b.center]
    cam = camera_from(camera, center)
    with Renderer(cam.image_size) as renderer:
        for azimuth, image_out, points_out in zip(azimuths, images_out, keypoints_out):
            result = renderer.render(b, cam, float(azimuth), tuple(background))
            save_image(image_out, result.image)
            write_json(
                points_out,
                {
                    "image": str(image_out),
                    "image_size": [cam.image_size, cam.image_size],
                    "azimuth_deg": int(azimuth),
                    "names": list(COCO17_NAMES),
                    "keypoints": result.keypoints2d.tolist(),
                    "visibility": [int(v) for v in result.visibility],
                    "camera": {**camera, "target": center},
                },
            )
    write_json(
        skeleton_out,
        {
            "names": list(COCO17_NAMES),
            "keypoints3d": b.keypoints3d.tolist(),
            "center": center,
            "height_m": float(b.height_m),
            "vertices": int(len(b.vertices)),
            "faces": int(len(b.faces)),
        },
    )
    return {"renderer": "pyrender (EGL)", "body": {"vertices": int(len(b.vertices)), "height_m": float(b.height_m)}}
