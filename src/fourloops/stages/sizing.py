"""The sizing model set's builds: each configured real model at its real shape with random weights (GPU when
there is one), from config/architectures/, saved with save_pretrained for the real loaders (fourloops.sizing)."""

from __future__ import annotations


def sizing_model_stage(component: str, out_dir: str, device: str, seed: int, texts: list[str], model_set: str) -> dict:
    from fourloops import determinism

    determinism.apply(seed)
    from fourloops.sizing import MODEL_SET, SizingError, build
    from fourloops.stage import builds, load

    if model_set != MODEL_SET:
        raise SizingError(f"model_set = {model_set!r}: the sizing models are built for model_set {MODEL_SET!r} only")
    declared = builds()[component]  # the GPU declaration's build (fourloops.stage.Build)
    builder = load(declared.builder) if declared.builder else None
    record = build(component, out_dir, device, seed=int(seed), texts=list(texts), builder=builder)
    return {"seed": int(seed), "precision": declared.dtype, "sizing_model": record}
