"""The LoRA's config against the architecture descriptions (config/architectures), at parse time, before any job.

A check, not a job's code: no job's lineage holds it (it reads the sizing set's architecture files, whose module
imports the detector's and the scorer's code; in fourloops.lora it put them in the LoRA's lineage)."""

from __future__ import annotations

LINEAGE = False  # whether a run starts, never what a job writes: not in any job's lineage

from pathlib import Path


def config_problems(config: dict, arch_dir: str | Path | None = None) -> list[str]:
    """What the config asks of the LoRA that the architecture descriptions (config/architectures) refuse,
    before any job: lora.resolution against the configured backend's patch x VAE factor, and
    lora.target_modules against its transformer's `lora_targets` (the smoke set's transformer is the smoke
    backend's class). A backend whose description lists no `lora_targets` is checked in the job only."""
    from fourloops import sizing
    from fourloops.lora import resolution_multiple

    lora = config.get("lora")
    if not lora:
        return []
    problems = []
    backend = config["generator"]["backend"]
    transformer, _, vae = sizing.COMPONENTS[backend]
    t_arch, v_arch = sizing.architecture(transformer, arch_dir), sizing.architecture(vae, arch_dir)
    multiple, why = resolution_multiple(backend, t_arch["config"], v_arch["config"])
    if int(lora["resolution"]) % multiple:
        problems.append(f"lora.resolution = {lora['resolution']}: the {backend} model cannot take it; allowed: a "
                        f"multiple of {multiple} ({why}, from {t_arch['path']} and {v_arch['path']})")
    trained = config["smoke"]["generator_backend"] if config["model_set"] == "smoke" else backend
    arch = sizing.architecture(sizing.COMPONENTS[trained][0], arch_dir)
    names = arch.get("lora_targets")
    if names:
        unknown = [t for t in lora["target_modules"] if not any(t == n or t.endswith("." + n) for n in names)]
        if unknown:
            problems.append(f"lora.target_modules = {list(lora['target_modules'])}: {unknown} name no Linear layer "
                            f"of the {trained} transformer; allowed: names among {list(names)} ({arch['path']} "
                            "lora_targets)")
    return problems
