"""The camera LoRA's training records: the Anny body rendered at the records' own azimuths, and ordered
pairs of distinct views (source -> target) with the instruction naming the target azimuth (desk, CPU)."""

from __future__ import annotations


def lora_records_stage(images_out: list[str], records_out: str, azimuths: list[int], count: int, seed: int,
                       instruction: str, body: dict, camera: dict, background) -> dict:
    """Build the body once, render every record azimuth, draw `count` pairs with `seed`, write the records."""
    from fourloops import lora_records
    from fourloops.io import save_image
    from fourloops.render import Renderer
    from fourloops.camera import camera_from
    from fourloops.stages.render import body_from

    if len(images_out) != len(azimuths):
        raise ValueError(f"{len(images_out)} record images for {len(azimuths)} azimuths")
    pairs = lora_records.azimuth_pairs(azimuths, count, seed)  # refused before anything is rendered or written
    image_of = dict(zip((int(a) for a in azimuths), images_out))
    records = lora_records.make_records(pairs, instruction, image_of)
    b = body_from(body)
    cam = camera_from(camera, [float(c) for c in b.center])
    with Renderer(cam.image_size) as renderer:
        for azimuth, image_out in zip(azimuths, images_out):
            save_image(image_out, renderer.render(b, cam, float(azimuth), tuple(background)).image)
    lora_records.write_records(records_out, records)
    return {"renderer": "pyrender (EGL)", "records": len(records), "seed": int(seed),
            "azimuth_pairs_available": len(azimuths) * (len(azimuths) - 1)}
