"""A stage's declaration: the one place the rest of the workflow learns what a stage's jobs need.

A stage is two modules of the same name. `fourloops.stages.<name>` holds the function(s) its jobs run:
the code in their lineage. `fourloops.declarations.<name>` holds one `STAGE = Stage(...)` naming that code
module, the Snakemake rules its jobs come from, their profile tag, what a job asks of a machine, what it
needs on the machine before a real run, which provenance records measure which model key, and whether a
failed rerun must keep the last good outputs. A declaration says `LINEAGE = False` and no code module
imports one, so tuning an ask, a knob or a need reruns nothing (a wall is where and whether a job runs,
never what it writes). The wall check, the preflight, the plan, the measured-beats-estimated lookup and
lineage reach stages only through `stage_for(rule)`: adding a stage means adding its two modules, nothing
else here.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import importlib
import pkgutil
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

from fourloops import lineage
from fourloops.machines import PROFILE_TAGS

if TYPE_CHECKING:  # no import cost at parse time
    from pathlib import Path

    from fourloops.asks import Ask, Measurements
    from fourloops.preflight import Need


@dataclass(frozen=True)
class AskContext:
    """What an ask may consult besides the job: model facts, measurements, the target machine."""

    facts: dict
    measured: "Measurements | None" = None
    machine: str = "desk"
    rented: bool = False  # a machine the executor rents (the RunPod executor's pod), not one Snakemake starts jobs on
    provided_vram_mb: int | None = None  # what the Snakemake that runs the jobs provides (--resources vram_mb), if any


@dataclass(frozen=True)
class Knob:
    """A config value in a rule's params that the stage's ask reads, which a lever may turn (fourloops.levers).

    `values`: the values to try, mildest first, the last its stop; empty: the config schema's (a precision's
    enum values of fewer bytes a parameter; a size's steps of `multipleOf` down to its minimum)."""

    where: tuple[str, ...]  # path of the config mapping inside the rule's params
    key: str  # its field
    config: tuple[str, ...]  # the config key it comes from (and its property in the config schema)
    kind: str  # precision | size | batch | setting
    values: tuple = ()


@dataclass(frozen=True)
class Build:
    """One model of the sizing set: models/sizing/<name>, the real shape with random weights (rules/sizing.smk)."""

    name: str
    model: str  # the models.yaml model whose weights the build holds on its device before saving them
    dtype: str = "bf16"
    # "module:function" (out_dir, device, texts, arch_dir) -> record; None: fourloops.sizing's own builder
    builder: str | None = None


def _precision(settings: dict) -> str:
    return str(settings["precision"])


def _resolution(settings: dict) -> int | None:
    return int(settings["resolution"]) if "resolution" in settings else None


@dataclass(frozen=True)
class Gpu:
    """A GPU component, declared once by the stage whose jobs load it: what the probe rule measures
    (results/probe/<machine>/<name>.json), what the sizing set builds for it, the key its measurements stand
    under, what one load asks, and the knobs a lever may turn. The probe rule, the sizing rule and the
    levers read it here; callables named "module:function" are imported only by the job that runs them."""

    name: str
    key: "Callable[[dict], str]"  # settings -> its models.yaml key (what a probe record measures)
    probe: str  # "module:function" (settings, memory, references, items, prompt) -> (load s, about, configs)
    # the run's config -> its settings (the smoke and sizing sets' stand-ins included); None: probed by the
    # benches only (bench/sizing_gpu.py), not by the probe rule
    settings: "Callable[[dict], dict] | None" = None
    ask: "Callable[[dict, dict], Ask] | None" = None  # (facts, settings) -> a probe job's ask
    # settings -> the most items one call of it takes, for a component with a batch knob (its ask then also takes
    # `batch=`): the probe job times one item a call and a batch its walls choose (fourloops.declarations.probe)
    batch_most: "Callable[[dict], int] | None" = None
    needs: "Callable[[dict, str], list[Need]] | None" = None  # (settings, rule) -> what a real run needs
    knobs: tuple[Knob, ...] = ()  # `where` inside the settings mapping
    builds: tuple[Build, ...] = ()  # the sizing set's models of this component
    build_of: "Callable[[dict], str] | None" = None  # settings -> the build it loads; None: its only build
    model_at: str = "model"  # the settings key naming where its model is (the sizing record sits beside it)
    precision: "Callable[[dict], str]" = _precision
    resolution: "Callable[[dict], int | None]" = _resolution
    smoke_inputs: "Callable[[dict], dict] | None" = None  # config -> the smoke set's built models it reads
    offload: bool = False  # its weights may stream from the host (a lever: fourloops.asks.offload_ask)

    def __post_init__(self):
        if self.settings is not None and self.ask is None:
            raise ValueError(f"GPU component {self.name}: the probe rule runs it (settings given) but it has no ask")
        if self.build_of is None and len(self.builds) > 1:
            raise ValueError(f"GPU component {self.name}: {len(self.builds)} sizing builds and no build_of to choose")

    def knobs_at(self, where: tuple[str, ...]) -> tuple[Knob, ...]:
        """Its knobs as a rule's params carry its settings at `where`."""
        return tuple(replace(k, where=tuple(where) + k.where) for k in self.knobs)

    def build_for(self, settings: dict) -> str | None:
        if self.build_of is not None:
            return self.build_of(settings)
        return self.builds[0].name if self.builds else None


@dataclass(frozen=True)
class Stage:
    name: str
    rules: tuple[str, ...]
    # the module whose import closure (with each rule's script) is its jobs' code: their lineage; None for a
    # stage whose rules write no outputs (nothing to mark stale)
    code: str | None = None
    profile: str = "desk"
    # (ctx, wildcards, params) -> Ask; None: a CPU job whose RAM/time come from models.yaml `stages.<name>`
    ask: "Callable[[AskContext, dict, dict], Ask] | None" = None
    # params -> what a real run needs on the machine that runs the job (devices, weights, packages)
    needs: "Callable[[dict], list[Need]] | None" = None
    # a provenance record's data -> the model key its peak VRAM measures (None: not a measurement)
    measures: "Callable[[dict], str | None] | None" = None
    # a failed rerun restores the previous outputs (money was spent on them)
    keep_last_good: bool = False
    # the run's config -> the profile tag of this stage's jobs, when the config chooses it (lora.profile);
    # else `profile`. Not a param: where a job runs is never in its lineage.
    profile_of: "Callable[[dict], str] | None" = None
    # the config knobs a refused job's levers turn, in the order they are offered (the stage's own first)
    knobs: tuple[Knob, ...] = ()
    # wildcards -> the knobs of that job, where they depend on it (the probe: its component's); else `knobs`
    knobs_of: "Callable[[dict], tuple[Knob, ...]] | None" = None
    # wildcards -> where the params carry the settings of a generator whose weights may stream from the host
    # (the offload lever), or None
    offload_at: "Callable[[dict], tuple[str, ...] | None] | None" = None
    # the GPU components this stage's jobs load, declared here once (the probe and sizing rules read them)
    gpus: tuple[Gpu, ...] = ()
    # its jobs' bytes change with their batch (fourloops.batching): the batch chosen for the job's machine is then
    # part of its lineage, so a job placed where another batch fits runs again
    batch_changes_bytes: bool = False
    # (params, working directory) -> what a job of this stage without output files would judge as the files are
    # now (the publication gate's refusals), which `fourloops plan` shows beside the job; None: nothing to show
    preview: "Callable[[dict, Path], dict] | None" = None
    module: str = field(default="", compare=False)

    def __post_init__(self):
        if self.profile not in PROFILE_TAGS:
            raise ValueError(f"stage {self.name}: profile = {self.profile!r}; allowed: one of {list(PROFILE_TAGS)}")
        if not self.rules:
            raise ValueError(f"stage {self.name}: names no rule")
        if (self.knobs or self.knobs_of) and self.ask is None:
            raise ValueError(f"stage {self.name}: declares knobs but no ask to re-ask them through")

    def ask_for(self, ctx: AskContext, wildcards: dict, params: dict) -> "Ask":
        from fourloops import asks

        if self.ask is None:
            return asks.stage_ask(ctx.facts, self.name)
        return self.ask(ctx, wildcards, params)

    def profile_for(self, config: dict) -> str:
        if self.profile_of is None:
            return self.profile
        tag = self.profile_of(config)
        if tag not in PROFILE_TAGS:
            raise ValueError(f"stage {self.name}: profile = {tag!r} from the config; allowed: one of {list(PROFILE_TAGS)}")
        return tag

    def knobs_for(self, wildcards: dict) -> tuple[Knob, ...]:
        return tuple(self.knobs_of(wildcards)) if self.knobs_of is not None else self.knobs

    def offload_for(self, wildcards: dict) -> tuple[str, ...] | None:
        return self.offload_at(wildcards) if self.offload_at is not None else None

    def needs_for(self, params: dict) -> "list[Need]":
        return list(self.needs(params)) if self.needs else []


class UnknownRule(LookupError):
    pass


_REGISTRY: dict[str, Stage] | None = None


DECLARATIONS = "fourloops.declarations"


def registry(package: str = DECLARATIONS) -> dict[str, Stage]:
    """Rule name -> Stage, from every module of `package` that declares a STAGE."""
    global _REGISTRY
    if _REGISTRY is not None and package == DECLARATIONS:
        return _REGISTRY
    pkg = importlib.import_module(package)
    out: dict[str, Stage] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{package}.{info.name}")
        stage = getattr(module, "STAGE", None)
        if not isinstance(stage, Stage):
            continue
        stage = Stage(**{**stage.__dict__, "module": module.__name__})
        if stage.code is not None and lineage._module_file(stage.code) is None:
            raise ValueError(f"{module.__name__}: code = {stage.code!r} names no module; allowed: the module its "
                             f"jobs run, e.g. 'fourloops.stages.{info.name}'")
        for rule in stage.rules:
            if rule in out:
                raise ValueError(f"rule {rule} is declared by two stages: {out[rule].module} and {module.__name__}")
            out[rule] = stage
    if package == DECLARATIONS:
        _REGISTRY = out
    return out


def stage_for(rule: str) -> Stage:
    try:
        return registry()[rule]
    except KeyError:
        raise UnknownRule(
            f"rule {rule} has no stage declaration: add `STAGE = Stage(name=..., rules=({rule!r},), ...)` to its "
            f"declaration, src/fourloops/declarations/<stage>.py (the wall check, preflight and lineage read it there)"
        ) from None


def measured_key(rule: str, data: dict) -> str | None:
    """The model key a provenance record of `rule` measures (its stage's `measures`); None: not a measurement."""
    stage = registry().get(rule)
    return stage.measures(data) if stage is not None and stage.measures else None


def stages() -> list[Stage]:
    seen, out = set(), []
    for stage in registry().values():
        if stage.name not in seen:
            seen.add(stage.name)
            out.append(stage)
    return out


def gpus() -> dict[str, Gpu]:
    """Component name -> its GPU declaration, from every stage (a name declared twice is refused)."""
    out: dict[str, Gpu] = {}
    for stage in stages():
        for g in stage.gpus:
            if g.name in out:
                raise ValueError(f"GPU component {g.name} is declared twice: by stage {out[g.name][1]} and {stage.name}")
            out[g.name] = (g, stage.name)
    return {name: g for name, (g, _) in out.items()}


def gpu(name: str) -> Gpu:
    found = gpus()
    if name not in found:
        raise LookupError(f"GPU component {name!r} has no declaration; allowed: one of {sorted(found)} (a stage "
                          "declares its own with `Stage(gpus=(Gpu(name=...),))`)")
    return found[name]


def probed() -> list[str]:
    """The components the probe rule measures, in declaration order."""
    return [name for name, g in gpus().items() if g.settings is not None]


def builds() -> dict[str, Build]:
    """Sizing build name -> its declaration, over every GPU component."""
    out: dict[str, Build] = {}
    for g in gpus().values():
        for b in g.builds:
            if b.name in out:
                raise ValueError(f"sizing build {b.name} is declared twice (component {g.name})")
            out[b.name] = b
    return out


def load(dotted: str):
    """The function a declaration names as "module:function"."""
    module, _, name = dotted.partition(":")
    return getattr(importlib.import_module(module), name)
