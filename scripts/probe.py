"""One pass of a configured model on this machine: load time, pass time, peak VRAM, with its apparatus."""
import sys
import time

from fourloops import asks, guard, provenance
from fourloops.io import write_json

smk = snakemake  # noqa: F821 - injected by Snakemake
component = smk.wildcards.component
record = {"machine_name": smk.wildcards.machine, "component": component, "model_set": smk.params.model_set}
with open(smk.log[0], "w") as log:
    sys.stdout = sys.stderr = log
    if component == "generator":
        gen = dict(smk.params.generator)
        record["key"] = asks.generator_key(gen)
        device = gen["device"]
    else:
        det = dict(smk.params.detector)
        record["key"] = asks.detector_key(det)
        device = det["device"]
    if device.startswith("cuda"):
        guard.ensure_card_free(float(smk.params.busy_card_limit_gib), int(device.split(":")[1]) if ":" in device else 0)
    import torch
    from PIL import Image

    t0 = time.perf_counter()
    if component == "generator":
        from fourloops.generate import load_backend

        model = load_backend(gen["backend"], gen["model"], gen.get("revision"), gen["precision"], device, {
            "num_inference_steps": 1, "guidance": gen["guidance"], "width": gen["size"], "height": gen["size"],
            "negative_prompt": gen.get("negative_prompt") or None})
        load_s = time.perf_counter() - t0
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        t1 = time.perf_counter()
        model.generate([Image.new("RGB", (gen["size"], gen["size"]), "white")], "a person", seed=0)
    else:
        from fourloops.keypoints import load_detector

        model = load_detector(det["weights"], device=device, resolution=det["resolution"])
        load_s = time.perf_counter() - t0
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        t1 = time.perf_counter()
        model.detect(Image.new("RGB", (det["resolution"], det["resolution"]), "white"))
    record.update(
        load_seconds=round(load_s, 2),
        pass_seconds=round(time.perf_counter() - t1, 2),
        peak_vram_gib=provenance.peak_vram_gib(),
        gpu_name=((provenance.gpu_info() or {}).get("gpus") or [{}])[0].get("name"),
        apparatus={"machine": provenance.machine(), "packages": provenance.package_versions(),
                   "code": provenance.code_version(provenance.os.environ.get("FOURLOOPS_REPO")),
                   "invocation": provenance.os.environ.get("FOURLOOPS_INVOCATION", ""),
                   "method": "torch.cuda.max_memory_allocated after one pass (no CUDA context)"},
    )
    write_json(smk.output[0], record)
