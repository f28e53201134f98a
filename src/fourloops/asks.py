"""What a job asks of a machine, computed from config/models.yaml facts and the job's params.

Measured beats estimated: a probe on the machine (results/probe/<machine>/*.json), then an earlier
job's provenance (results/provenance/...), then a seed's measured row in models.yaml, then the
estimate. Every figure carries where it came from. No torch import here: the workflow parses fast.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import json
import os
import math
from dataclasses import dataclass, field
from pathlib import Path

GIB = 2**30
MIB = 2**20


def load_facts(path: str | Path) -> dict:
    from fourloops.config import load_model_facts  # validated: config/models.schema.yaml

    return load_model_facts(path)


@dataclass(frozen=True)
class Figure:
    """One asked quantity (GiB, or seconds) and where it came from."""

    value: float
    source: str


@dataclass(frozen=True)
class Ask:
    """What one job asks of the machine that runs it."""

    vram: Figure
    ram: Figure
    seconds: Figure
    os: str = "linux"
    arch: str = "x86_64"
    devices: tuple[str, ...] = ()
    licensed: tuple[str, ...] = ()
    model: str = ""
    batch: int = 1  # items a call (fourloops.batching): the job's `batch` resource

    @property
    def vram_mb(self) -> int:
        return gib_to_mb(self.vram.value)

    @property
    def mem_mb(self) -> int:
        return gib_to_mb(self.ram.value)

    @classmethod
    def of(cls, vram_gib: float = 0.0, ram_gib: float = 1.0, source: str = "given", **kw) -> "Ask":
        """An ask from plain numbers (tests, hand-made stages)."""
        return cls(vram=Figure(float(vram_gib), source), ram=Figure(float(ram_gib), source),
                   seconds=Figure(float(kw.pop("seconds", 0.0)), source), **kw)


def gib_to_mb(gib: float) -> int:
    return int(math.ceil(round(gib * GIB / MIB, 6)))


# ------------------------------------------------------------------------------------- estimator
def _dtype_bytes(facts: dict, model: dict, dtype: str) -> float:
    if dtype == "nf4":
        dtype = model.get("nf4_format", "nf4")
    return float(facts["bytes_per_param"][dtype])


def component_gib(facts: dict, model: dict, name: str, dtype: str) -> float:
    comp = model["components"][name]
    params = float(comp["params"])
    if dtype == "nf4":
        if comp.get("quantised", True) is False:
            return params * facts["bytes_per_param"]["bf16"] / GIB
        keep = float(comp.get("unquantised_params", 0.0))
        return ((params - keep) * _dtype_bytes(facts, model, "nf4") + keep * facts["bytes_per_param"]["bf16"]) / GIB
    return params * _dtype_bytes(facts, model, dtype) / GIB


def _activation(model: dict, mode: str, resolution: int | None, between: str | None = None) -> float:
    table = (model.get("activations_gib") or {}).get(mode) or {}
    if not table:
        return 0.0
    points = {int(k): float(v) for k, v in table.items()}
    if resolution is None or resolution in points:
        return points.get(resolution, next(iter(points.values())))
    below = [r for r in points if r < resolution]
    above = [r for r in points if r > resolution]
    if between == "pixels_linear" and below and above:
        # between two measured resolutions: linear in the pixel count (OmniGen2 at 640 px on an H200
        # allocated 1.22 GiB over its weights, 1.23 this way and 1.39 scaled from 512 alone)
        lo, hi = max(below), min(above)
        t = (resolution ** 2 - lo ** 2) / (hi ** 2 - lo ** 2)
        return points[lo] + t * (points[hi] - points[lo])
    # activations grow with the pixel count: scale from the nearest measured resolution
    ref = min(points, key=lambda r: abs(r - resolution))
    return points[ref] * (resolution / ref) ** 2


def estimate_vram_gib(
    facts: dict,
    model_name: str,
    *,
    mode: str = "inference",
    precision: str = "bf16",
    resident: list[str] | None = None,
    resolution: int | None = None,
    batch: int = 1,
    frozen_dtype: str | None = None,
) -> tuple[float, dict]:
    """Peak VRAM (GiB, as torch allocates it) of one pass, and its breakdown.

    mode: "weights" (loaded, no pass), "inference" (one pass at `resolution` x `batch`) or
    "lora_step" (one LoRA optimizer step; frozen weights at `frozen_dtype`, the text encoder in
    the model's lora_text_encoder_dtype when resident).
    """
    model = facts["models"][model_name]
    if "recorded" in model:
        return float(model["recorded"]["vram_gib"]), {"recorded": float(model["recorded"]["vram_gib"])}
    names = list(resident) if resident else list(model["components"])
    parts: dict[str, float] = {}
    for name in names:
        dtype = precision
        if mode == "lora_step":
            dtype = frozen_dtype or "bf16"
            if name != "transformer":
                dtype = model.get("lora_text_encoder_dtype", "bf16")
        parts[f"{name} ({dtype})"] = component_gib(facts, model, name, dtype)
    if mode == "inference":
        # a batched call holds a share of one image's activations once (models.yaml activations_batch_shared,
        # fitted by bench/walls_fit.py on the detector's 1- and 32-image probes); the rest grows with the batch
        shared = float(model.get("activations_batch_shared", 0.0))
        parts[f"activations (inference, {resolution or '-'} px x {batch})"] = _activation(
            model, "inference", resolution, facts.get("activations_between")) * (shared + (1 - shared) * batch)
    elif mode == "lora_step":
        act = _activation(model, "lora_step", resolution, facts.get("activations_between")) * batch
        parts[f"activations (lora step, {resolution} px)"] = act
        if (frozen_dtype or "bf16") == "fp32":
            # under bf16 autocast the fp32 weights' casts, and a share of the step's activations that fp32 frozen
            # layers hold over bf16's (models.yaml autocast_activations_share; 0 where a models.yaml predates it)
            parts["autocast bf16 casts of fp32 weights"] = float(model.get("autocast_cast_gib", 0.0))
            share = float(model.get("autocast_activations_share", 0.0))
            if share:
                parts["fp32 frozen layers' share of the activations"] = share * act
    return sum(parts.values()), parts


def seed_row(facts: dict, model_name: str, **cfg) -> Figure | None:
    """A seed's measured peak in models.yaml for exactly this configuration (inference rows only)."""
    model = facts["models"][model_name]
    for row in model.get("measured") or []:
        if row.get("mode") != "inference" or row.get("resident"):
            continue
        if all(row.get(k, v) == v for k, v in cfg.items() if v is not None):
            return Figure(float(row["gib"]), f"measured: {row['source']}")
    return None


# ------------------------------------------------------------------------------ measured figures
# How a forecast's source names the warm-up it took from a probe (Measurements.timing). All but the first are not a
# fresh process's: the probe ran in a machine's first process of its model and compiled kernels then, or its record
# does not say; `fourloops plan` then says how to measure a fresh process's (the probe once more on that machine).
WARMUP_FRESH = "first configuration's, no kernel compiled"
WARMUP_FLOOR = "smallest over configurations"
WARMUP_ONE_COMPILED = "its one configuration's, with one-off kernel compilation: high"
WARMUP_ONE_UNSAID = "its one configuration's; its record does not say whether it compiled"
WARMUP_NOT_FRESH = (WARMUP_FLOOR, WARMUP_ONE_COMPILED, WARMUP_ONE_UNSAID)


def compiled_once(caches: dict) -> bool | None:
    """Whether a process, by its record's `kernel_caches` (before_kib, after_kib), compiled kernels that a later
    process on the machine finds made, so that its first item held a one-off cost: CUDA's JIT cache grew (PTX compiled
    by the driver, once per machine and driver), or a cache was filled from empty (the machine's first process of that
    compiler). Triton's cache growing from a filled state is not that: every later process of a model wrote some
    (a generator probe run twice on one machine: +100 KiB the second time, on another machine +190 KiB, with the
    CUDA JIT cache unchanged; a machine's second LoRA process, +584 KiB), and jobs pay it
    as the probe did. None when the record holds no sizes (then its `grew` alone says)."""
    before, after = caches.get("before_kib"), caches.get("after_kib")
    if not isinstance(before, dict) or not isinstance(after, dict):
        return None
    return (after.get("cuda_jit", 0.0) > before.get("cuda_jit", 0.0)
            or any(before.get(k, 0.0) == 0 < after[k] for k in after))


@dataclass
class Measurements:
    """Peak VRAM measured on real machines, by model key: probes first, then earlier jobs' provenance (the largest
    of a key's: its jobs differ in what the key does not name, e.g. a generator's references)."""

    probes: dict[str, list[dict]] = field(default_factory=dict)
    history: dict[str, Figure] = field(default_factory=dict)
    driver: dict[str, Figure] = field(default_factory=dict)  # the largest NVML peak of a process, by model key
    # the most reference images a measurement of a generator key was made with (probe configurations; a job's
    # reference_azimuths, one for a job that names none, a restyle's render): a job with more has no measurement
    references: dict[str, int] = field(default_factory=dict)
    # the largest LoRA rank a measurement of a lora_step key was made with (a probe configuration's, a job's)
    ranks: dict[str, int] = field(default_factory=dict)
    # the torch allocator each key's largest provenance pass (`history`) ran under (record_allocator)
    history_allocators: dict[str, str] = field(default_factory=dict)
    # the allocator the jobs being asked for will run under (fourloops.smk's ask context: the target machine's); a
    # measurement made under another is a floor for the job's estimate, never its ask (None: no such check)
    allocator: str | None = None

    @classmethod
    def load(cls, workdir: str | Path, measures, index=None) -> "Measurements":
        """Probes under results/probe/, and every provenance record that `measures(rule, data)` says measures a
        model key (the caller's stage lookup: fourloops.stage.measured_key; None: not a measurement). `index`: the
        working directory's fourloops.records index, when the caller has read it already."""
        from fourloops import records

        root = Path(workdir)
        out = cls()
        for path in sorted(root.glob("results/probe/*/*.json")):
            try:
                rec = json.loads(path.read_text())
                key = rec["key"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
            # a probe without a peak (a CPU run, a configuration that failed) still times its machine
            out.probes.setdefault(key, []).append({**rec, "path": str(path)})
            measured_confs = [c for c in rec.get("configurations") or [] if c.get("peak_vram_gib") is not None]
            out._most(out.references, key, [c.get("references") for c in measured_confs])
            out._most(out.ranks, key, [c.get("rank") for c in measured_confs])
            out._saw(key, rec.get("peak_nvml_process_gib"), f"NVML peak of the probe on {rec.get('machine_name', '?')}, {path}")
        index = index if index is not None else records.index(root)
        for record in index.records:
            peak = record.data.get("peak_vram_gib")
            key = measures(record.rule, record.data) if peak is not None else None
            if key and key.startswith("generator/"):
                job = (record.data.get("params") or {}).get("job") or {}
                out._most(out.references, key, [len(job.get("reference_azimuths") or [0])])
            if key and key.startswith("lora_step/"):
                out._most(out.ranks, key, [((record.data.get("params") or {}).get("train") or {}).get("rank")])
            if key and (key not in out.history or float(peak) > out.history[key].value):  # the largest pass of the key
                where = root / record.path
                out.history[key] = Figure(float(peak), f"measured: provenance {where} ({record.data.get('started', '?')})")
                out.history_allocators[key] = record_allocator(record.data)
            if key:
                out._saw(key, record.data.get("nvml_peak_gib"), f"NVML peak of the job, provenance {root / record.path}")
        for recs in out.probes.values():  # the wall seconds of the job that wrote each probe file
            for rec in recs:
                walls = [r.data["wall_seconds"] for r, _ in index.producers(os.path.relpath(rec["path"], root))
                         if r.data.get("wall_seconds") is not None]
                if walls:
                    rec["job_wall_seconds"] = float(walls[-1])
        return out

    @staticmethod
    def _most(table: dict[str, int], key: str, counts) -> None:
        counts = [int(n) for n in counts if n is not None]
        if counts:
            table[key] = max(table.get(key, 0), *counts)

    def _saw(self, key: str, gib, source: str) -> None:
        if gib is not None and (key not in self.driver or float(gib) > self.driver[key].value):
            self.driver[key] = Figure(float(gib), f"measured: {source}")

    def at_least_seen(self, key: str, fig: Figure) -> Figure:
        """`fig`, or what the driver saw of a process of this configuration where that was more: a wall is
        never below the driver."""
        seen = self.driver.get(key)
        if seen is None or seen.value <= fig.value:
            return fig
        return Figure(seen.value, f"{seen.source} (over the model's {fig.value:.2f} GiB)")

    def _probe(self, key: str, machine: str) -> dict | None:
        """The probe record of `key` with a peak: the target machine's own first, then any other machine's."""
        probes = [r for r in self.probes.get(key) or [] if r.get("peak_vram_gib") is not None]
        return min(probes, key=lambda r: r.get("machine_name") != machine) if probes else None

    def peak(self, key: str, machine: str) -> Figure | None:
        rec = self._probe(key, machine)
        if rec is not None:
            where = rec.get("machine_name", "?")
            gpu = rec.get("gpu_name") or "?"
            return Figure(float(rec["peak_vram_gib"]), f"measured: probe on {where} ({gpu}), {rec['path']}")
        return self.history.get(key)

    def other_allocator(self, key: str, machine: str) -> str | None:
        """Why the measurement `peak` gives for `key` is no measurement of a job under `self.allocator`: made under
        another torch allocator, whose pool holds another slack over what torch allocated and whose allocated peak
        differs too (on an H200, a generate job under the default allocator allocated 15.39 GiB where
        the probe under expandable segments had allocated 15.19, and its pool held 0.79 GiB more); None when
        it ran under the same, or when no allocator is asked for."""
        if self.allocator is None:
            return None
        rec = self._probe(key, machine)
        ran = record_allocator(rec) if rec is not None else self.history_allocators.get(key)
        if ran is None or ran == self.allocator:
            return None
        return f"under torch's {ran} allocator, not the {self.allocator} one these jobs run under"

    def timing(self, key: str, machine: str, **match) -> tuple[float, float, str] | None:
        """(once per job s, s per item, source) from the target machine's own probe, for the configuration matching
        `match` (e.g. references=2); time depends on the GPU, so another machine's probe is not used.
        Once per job, as the probe's own process paid it: the load; the first item's warm-up over a steady one; and
        the process's start and finish (the probe job's wall seconds, from its provenance, less its load, every item
        and the seconds the probe took to make its own record's apparatus), when known.
        The warm-up: a job is a fresh process, as the probe's first configuration was, so that configuration's
        first-item excess, when the probe compiled nothing that a later process finds made (`kernel_caches`:
        compiled_once false; for a record with no cache sizes, `grew` false). Where it did,
        or a record does not say, that excess held the machine's one-off compilation too, and the smallest
        first-item excess over the probe's configurations stands in (the later ones ran warm in the same process:
        a floor; on an H200 the generator probe's first item took 11.9 s in a machine's first OmniGen2 process,
        the DAG's first views 2.3-2.8 s). A probe of one configuration (the LoRA step's)
        has only its own excess: the source says so, and that it is high where the probe compiled (on an H200, a
        machine's first LoRA process's first step took 19.3 s, the second process's 5.6 s)."""
        for rec in self.probes.get(key) or []:
            if rec.get("machine_name") != machine:
                continue
            timed = [c for c in rec.get("configurations") or [] if c.get("seconds_per_item") is not None]
            conf = _timed_conf(timed, match)
            if conf is None:
                continue
            load = float(rec.get("load_seconds") or 0.0)
            excess = [float(c.get("first_item_seconds") or 0.0) - float(c["seconds_per_item"]) for c in timed]
            caches = rec.get("kernel_caches") or {}
            once = compiled_once(caches)
            compiled = caches.get("grew") if once is None else once  # None: the record does not say
            fresh = compiled is False
            warm = max(0.0, excess[0] if fresh else min(excess))
            items = sum(float(i["seconds"]) for c in timed for i in c.get("items") or [] if i.get("seconds") is not None)
            # the job's wall when a Snakemake job wrote the probe; else, for bench/sizing_gpu.py's probe process, the
            # span a job's wall covers (imports to record: child_wall_seconds), else its whole process's (records
            # before 2026-12-03, with the interpreter's start and teardown, which no job's wall holds)
            wall = next((rec[k] for k in ("job_wall_seconds", "child_wall_seconds", "process_wall_seconds")
                         if rec.get(k) is not None), None)
            # less the probe's own record (its apparatus: GPU, packages, code), which the job does not make
            apparatus = float(rec.get("apparatus_seconds") or 0.0)
            process = max(0.0, float(wall) - load - items - apparatus) if wall is not None else 0.0
            # a probe of one configuration (the LoRA step's) that compiled has no warm configuration to stand in:
            # its excess holds the machine's one-off compilation, and the forecast says it is high
            how = (WARMUP_FRESH if fresh else WARMUP_FLOOR if len(timed) > 1
                   else WARMUP_ONE_COMPILED if compiled else WARMUP_ONE_UNSAID)
            parts = (f"load {load:g} s + warm-up {warm:.3g} s ({how})"
                     + (f" + process {process:.3g} s" if wall is not None else ""))
            return (load + warm + process, float(conf["seconds_per_item"]),
                    f"measured: probe on {machine} ({rec.get('gpu_name') or '?'}), {rec['path']}: {parts}"
                    + (f"; {conf['read_between']}" if conf.get("read_between") else ""))
        return None


def _timed_conf(timed: list[dict], match: dict) -> dict | None:
    """The probe configuration of `match`: one that ran it, else a batch or a reference count no configuration
    ran, read between the probed ones nearest it (_between_batches, _between_references)."""
    confs = [c for c in timed if all(c.get(k) == v for k, v in match.items())]
    if confs:
        return confs[0]
    if "batch" in match:
        between = _between_batches(timed, {k: v for k, v in match.items() if k != "batch"}, int(match["batch"]))
        if between is not None:
            return between
    if "references" in match:
        return _between_references(timed, match)
    return None


def _between_references(timed: list[dict], match: dict) -> dict | None:
    """A generator view of a reference count no probe configuration ran, between the two probed counts nearest it
    (each at the match's batch, read as _timed_conf reads it): its seconds linear in the reference count, as its
    sequence is (each reference adds its image's tokens). None outside the probed counts: a view of more
    references than any probed is slower than any probed, and one of fewer is not measured either."""
    refs = int(match["references"])
    rest = {k: v for k, v in match.items() if k != "references"}
    probed = sorted({int(c["references"]) for c in timed if c.get("references") is not None})
    lower, upper = [r for r in probed if r < refs], [r for r in probed if r > refs]
    if not lower or not upper:
        return None
    lo, hi = lower[-1], upper[0]
    a, b = _timed_conf(timed, {**rest, "references": lo}), _timed_conf(timed, {**rest, "references": hi})
    if a is None or b is None:
        return None
    per = float(a["seconds_per_item"]) + (float(b["seconds_per_item"]) - float(a["seconds_per_item"])) * (refs - lo) / (hi - lo)
    how = "; ".join(dict.fromkeys(c["read_between"] for c in (a, b) if c.get("read_between")))
    return {**a, "references": refs, "seconds_per_item": round(per, 4),
            "read_between": f"a view of {refs} references interpolated between the probed {lo} and {hi}"
                            + (f" ({how})" if how else "")}


def _between_batches(confs: list[dict], match: dict, batch: int) -> dict | None:
    """A batch no probe configuration ran, from the two probed batches nearest it (configurations matching `match`
    with a `batch`): a call's seconds taken as linear in its items between them, T(b) = b x seconds_per_item(b),
    read at `batch` and divided by it. Beyond the largest probed batch, that batch's seconds an item (a call does
    not get cheaper an item without measuring it). None with fewer than two probed batches."""
    rows = {int(c["batch"]): c for c in confs if c.get("batch") is not None
            and all(c.get(k) == v for k, v in match.items())}
    if len(rows) < 2:
        return None
    probed = sorted(rows)
    if batch > probed[-1]:
        top = rows[probed[-1]]
        return {**top, "read_between": f"an item at batch {batch} taken as at the largest probed, {probed[-1]}"}
    lo = max(b for b in probed if b < batch)
    hi = min(b for b in probed if b > batch)
    t_lo, t_hi = lo * float(rows[lo]["seconds_per_item"]), hi * float(rows[hi]["seconds_per_item"])
    call = t_lo + (t_hi - t_lo) * (batch - lo) / (hi - lo)
    return {**rows[lo], "batch": batch, "seconds_per_item": round(call / batch, 4),
            "read_between": f"a call of {batch} interpolated between the probed calls of {lo} and {hi}"}


def _measured_seconds(measured: Measurements | None, key: str, machine: str, n_items: float, what: str,
                      **match) -> Figure | None:
    found = measured.timing(key, machine, **match) if measured is not None else None
    if found is None:
        return None
    once, per, source = found
    return Figure(once + n_items * per, f"{source} + {n_items:g} {what} x {per:g} s")


def generator_key(gen: dict) -> str:
    return f"generator/{gen['backend']}/{gen['precision']}/{gen['size']}"


def scorer_key(scorer: dict) -> str:
    return f"scorer/qwen3_vl_8b/{scorer['precision']}"


def detector_key(det: dict) -> str:
    return f"detector/rfdetr_keypoint_preview/fp32/{det['resolution']}"


# --------------------------------------------------------------------------------- per-job asks
def _cuda(device: str) -> bool:
    return str(device).startswith("cuda")


def process_kind(component: str, precision: str) -> str:
    """The kind of GPU process a job is, for what the driver sees of it over torch's allocated peak
    (models.yaml `process_overhead`): training (a LoRA step: autograd and the 8-bit optimizer's kernels), scorer
    (the vision-language model's long prefill and decoding, either precision), detector (batched fp32 convolutions
    and attention), nf4 (a generator's bitsandbytes 4-bit weights), inference (anything else)."""
    if component in ("lora_step", "lora_train"):
        return "training"
    if component in ("scorer", "detector"):
        return component
    return "nf4" if precision == "nf4" else "inference"


def record_allocator(rec: dict) -> str:
    """The torch allocator a probe or provenance record ran under: "expandable_segments" or "default" (a record
    that names none is from before records named it, when every process ran the default one)."""
    alloc = rec.get("cuda_allocator") or {}
    if isinstance(alloc, str):  # some job records held fourloops.gpumem.check_allocator's answer
        return "expandable_segments" if alloc == "expandable_segments" and rec.get("cuda_allocator_applied") else "default"
    if alloc.get("expandable_segments") is not None:
        return "expandable_segments" if alloc["expandable_segments"] else "default"
    from fourloops.gpumem import allocator_named

    return allocator_named(alloc.get("env") or {}) or "default"  # torch's variables as the record's process had them


def for_allocator(facts: dict, allocator: str) -> dict:
    """The facts as a machine with torch's `allocator` asks by: under expandable_segments each kind's overheads are
    models.yaml `process_overhead_expandable` (fitted by bench/walls_fit.py on records made so), else unchanged."""
    if allocator != "expandable_segments" or not facts.get("process_overhead_expandable"):
        return facts
    return {**facts, "process_overhead": {**(facts.get("process_overhead") or {}),
                                          **facts["process_overhead_expandable"]}}


def overhead(facts: dict, kind: str, size: int | None = None,
             references: int | None = None) -> tuple[float, float, float]:
    """(allocator reserve, activations reserve, CUDA context GiB) of a kind of process; the top-level figures for a
    kind not listed. A kind whose context steps with the resolution (`context_step`: from `from_px` on, its own
    `cuda_context_gib`) takes the step's context for a job at `size` px or more. A generator kind whose pool keeps
    less of a pass with fewer reference images (`activations_reserve_by_references`: count -> reserve) takes its
    count's reserve for a job of `references`; a count it does not list, the kind's `activations_reserve`."""
    over = (facts.get("process_overhead") or {}).get(kind) or {}
    per_act = float(over.get("activations_reserve", facts.get("activations_reserve", 0.0)))
    if by_references(facts, kind, references):
        per_act = float(over["activations_reserve_by_references"][int(references)])
    return (float(over.get("allocator_reserve", facts.get("allocator_reserve", 0.0))), per_act,
            context_gib(over, size, float(facts.get("cuda_context_gib", 0.0))))


def by_references(facts: dict, kind: str, references: int | None) -> bool:
    """Whether a kind's process with `references` reference images takes its count's own activations reserve
    (models.yaml `activations_reserve_by_references`) rather than the kind's."""
    over = (facts.get("process_overhead") or {}).get(kind) or {}
    return references is not None and int(references) in (over.get("activations_reserve_by_references") or {})


def context_gib(over: dict, size: int | None, default: float = 0.0) -> float:
    """The CUDA context of a kind's overheads `over` for a process at `size` px: its `context_step`'s from that
    resolution on, else its `cuda_context_gib` (`default` where it gives none)."""
    step = over.get("context_step")
    if step and size is not None and int(size) >= int(step["from_px"]):
        return float(step["cuda_context_gib"])
    return float(over.get("cuda_context_gib", default))


def with_context(facts: dict, fig: Figure, kind: str = "inference", *, weights_gib: float,
                 size: int | None = None, references: int | None = None) -> Figure:
    """What the driver sees of a process of `kind` whose torch peak is `fig` with `weights_gib` of it resident
    weights: the caching allocator's slack, a share of the whole peak and a share of what the pass adds over the
    weights (its activations: the pool keeps their freed blocks), and the CUDA context, as the records show them
    for that kind (models.yaml `process_overhead`, fitted by bench/walls_fit.py; at `size` px where it steps; for a
    generator's pass with `references` reference images where the kind's reserve depends on them)."""
    reserve, per_act, ctx = overhead(facts, kind, size, references)
    act = max(0.0, fig.value - weights_gib)
    kept, floor = activations_kept(facts, kind, act, references)
    refs = f" ({references} reference(s))" if by_references(facts, kind, references) else ""
    held = f"{per_act:.1%}{refs} of the {act:.2f} GiB over the weights"
    if floor > act * per_act:
        held = f"the pool's floor {floor:g} GiB (more than {held})"
    return Figure(fig.value * (1 + reserve) + kept + ctx,
                  f"{fig.source} + {kind} process: allocator reserve {reserve:.1%} + {held} + CUDA context {ctx:g} GiB")


def activations_kept(facts: dict, kind: str, act: float, references: int | None = None) -> tuple[float, float]:
    """(GiB, floor GiB): what a kind's pool keeps of a pass's `act` GiB of activations, its activations reserve's
    share (by `references` where the kind has one per count) or, where more, the kind's `activations_floor_gib`:
    a generator's pool keeps a few hundred MiB however small the pass (OmniGen2 NF4 at 512 px with 1 reference kept
    0.44 GiB of a 0.67 GiB pass, 0.96 of 2.45 at 1024 px)."""
    over = (facts.get("process_overhead") or {}).get(kind) or {}
    floor = float(over.get("activations_floor_gib", 0.0))
    return max(act * overhead(facts, kind, None, references)[1], floor), floor


def weights_gib(facts: dict, model_name: str, dtype: str, resident: list[str] | None = None) -> float:
    """The resident weights (GiB) of `model_name`'s components at `dtype` (all of them unless `resident`): the part
    of a process's peak the allocator holds in place, the rest being the pass's (`with_context`)."""
    model = facts["models"][model_name]
    if "recorded" in model:
        return 0.0
    return sum(component_gib(facts, model, c, dtype) for c in (resident or model["components"]))


def _card(facts: dict, measured, machine: str, device: str, key: str, estimate, weights: float,
          kind: str = "inference", size: int | None = None, floor: str | None = None,
          references: int | None = None, batched=None, batched_after=None) -> tuple[Figure, tuple]:
    """VRAM and devices of a model on `device`: measured beats estimated, plus the process's overhead over its
    `weights` GiB (at `size` px, where the kind's context steps with it); none on the CPU. `floor`: why a
    measurement of `key` may be of less than this job (the key names no reference count, rank or prompt, nor the
    torch allocator: Measurements.other_allocator), which makes it a floor for the job's own estimate, never its
    ceiling. `references`: a generator job's reference images (the pool's share of its pass, `overhead`).
    `batched`: a one-item peak -> the job's batch's (`estimate` gives the batch's already); what the driver saw of a
    one-item process is then no floor of its own. `batched_after`: instead, a one-item ask -> the job's batch's,
    laid on after the process's overhead (items measured at the driver, their slack in them; `estimate` gives one
    item's)."""
    if not _cuda(device):
        return Figure(0.0, "cpu device: no VRAM"), ()
    found = measured.peak(key, machine) if measured is not None else None
    if found is not None and batched is not None:
        found = batched(found)
    other = measured.other_allocator(key, machine) if found is not None else None
    floor = "; ".join(f for f in (floor, other) if f) or None
    fig = with_context(facts, found or estimate(), kind, weights_gib=weights, size=size, references=references)
    one_item = batched is None and batched_after is None
    fig = measured.at_least_seen(key, fig) if measured is not None and one_item else fig
    if floor and found is not None:
        est = with_context(facts, estimate(), kind, weights_gib=weights, size=size, references=references)
        if est.value > fig.value:
            fig = Figure(est.value, f"{est.source} (over {fig.value:.2f} GiB measured {floor}: {fig.source})")
    return (batched_after(fig) if batched_after else fig), ("cuda",)


def _loading_ram(facts: dict, model: dict, casts: dict[str, str] | None = None) -> Figure:
    """Host memory a job's load holds: the loaders map one component's safetensors at a time (pages the kernel can
    drop; the H200 runs of 2026-12-02 saw file-backed peaks of one component: Qwen-Image-Edit's NF4 load 15.8 GiB,
    its text encoder, of a 53.7 GiB model, and 1.4 GiB anonymous), so the largest component's bf16 copy, plus the host
    process, plus any component the job casts to another dtype in host memory (`casts`: component -> dtype, e.g. a
    LoRA's fp32 frozen transformer, anonymous memory)."""
    name, bf16 = max(((c, component_gib(facts, model, c, "bf16")) for c in model["components"]), key=lambda x: x[1])
    host = float(facts["stages"]["generate_host_gib"])
    cast = {c: component_gib(facts, model, c, d) for c, d in (casts or {}).items()}
    parts = f"the largest component ({name}) mapped in bf16 {bf16:.2f} + host {host:g}" + "".join(
        f" + {c} cast to {(casts or {})[c]} {g:.2f}" for c, g in cast.items())
    return Figure(bf16 + host + sum(cast.values()), f"estimate: {parts}")


def batch_item_gib(facts: dict, name: str, size: int, table: str = "batch_item_gib", mode: str = "inference") -> Figure:
    """What each item beyond the first adds to a call's torch peak at `size` px: models.yaml `table` (by resolution,
    scaled with the pixel count between and beyond the measured ones; `batch_item_gib` for a generator's views,
    `lora_batch_item_gib` for a LoRA step's samples) where the model has it, else a whole pass's activations of `mode`
    at that size (`activations_gib`), which holds the one-item peak's share of what a pass keeps and errs high."""
    model = facts["models"][name]
    between = facts.get("activations_between")
    if model.get(table):
        gib = _activation({"activations_gib": {"batch": model[table]}}, "batch", size, between)
        return Figure(gib, f"models.yaml {table} at {size} px {gib:.3f} GiB")
    gib = _activation(model, mode, size, between)
    return Figure(gib, f"estimate: one {mode} pass's activations at {size} px {gib:.3f} GiB (no {table})")


def batch_raise(batch: int, item: Figure, what: str):
    """A one-item peak -> the peak at `batch` items of `item` GiB each beyond the first; None at one item."""
    if batch <= 1:
        return None
    return lambda fig: Figure(fig.value + (batch - 1) * item.value,
                              f"{fig.source} + {batch - 1} further {what} x {item.source}")


def generator_ask(
    facts: dict, gen: dict, *, n_references: int = 1, n_views: int = 1, batch: int = 1,
    measured: Measurements | None = None, machine: str = "desk",
) -> Ask:
    """One generate job: the configured generator at its precision, all components on the card, `batch` views a
    pipeline call (a one-view call's peak, measured or estimated, plus `batch_item_gib` for each further view)."""
    name = gen["backend"]
    model = facts["models"][name]
    precision = gen["precision"]
    size = int(gen["size"])
    batch = max(1, int(batch))
    batched = batch_raise(batch, batch_item_gib(facts, name, size), "view(s)")

    def estimate() -> Figure:
        row = seed_row(facts, name, precision=precision, resolution=size)
        if row is None:
            gib, parts = estimate_vram_gib(facts, name, mode="inference", precision=precision, resolution=size)
            row = Figure(gib, "estimate: " + " + ".join(f"{k} {v:.2f}" for k, v in parts.items()))
        return batched(row) if batched else row

    key = generator_key(gen)
    seen = measured.references.get(key, 0) if measured is not None else 0
    vram, devices = _card(facts, measured, machine, gen["device"], key, estimate,  # estimate: up to 3 references
                          weights_gib(facts, name, precision), process_kind("generator", precision),
                          floor=f"with at most {seen} reference(s)" if seen < max(1, n_references) else None,
                          references=max(1, n_references), batched=batched)
    ram = _loading_ram(facts, model)
    secs = model.get("seconds") or {}
    per_view = secs.get("per_view_by_references") or {1: 60}
    refs = min(max(int(k) for k in per_view), max(1, n_references))
    # a probe of the batched path times a view at this batch; else a view as one call makes it (batching is faster)
    seconds = (_measured_seconds(measured, generator_key(gen), machine, n_views, f"views at {batch} a call",
                                 references=max(1, n_references), batch=batch)
               or _measured_seconds(measured, generator_key(gen), machine, n_views, "views",
                                    references=max(1, n_references)) or Figure(
        float(secs.get("load", 60)) + n_views * float(per_view.get(refs, per_view.get(str(refs), 60))),
        f"estimate: load + {n_views} views x {per_view.get(refs)} s ({refs} reference(s), RFD 1163)",
    ))
    return Ask(vram=vram, ram=ram, seconds=seconds, devices=devices, model=name, batch=batch)


def detector_ask(
    facts: dict, det: dict, *, n_images: int = 1, batch: int = 1, measured: Measurements | None = None,
    machine: str = "desk",
) -> Ask:
    """A keypoints job: the detector at its resolution, `batch` images a call (a one-image call's peak, measured or
    estimated, plus a pass's activations for each further image)."""
    name = "rfdetr_keypoint_preview"
    model = facts["models"][name]
    res = int(det["resolution"])
    batch = max(1, int(batch))
    batched = batch_raise(batch, batch_item_gib(facts, name, res), "image(s)")

    def estimate() -> Figure:
        row = seed_row(facts, name, precision="fp32", resolution=res, batch=batch)
        if row is not None:
            return row
        gib, parts = estimate_vram_gib(facts, name, mode="inference", precision="fp32", resolution=res, batch=batch)
        return Figure(gib, "estimate: " + " + ".join(f"{k} {v:.3f}" for k, v in parts.items()))

    stage = facts["stages"]["keypoints_cpu"]
    ram = Figure(float(stage["ram_gib"]), stage["source"])
    secs = model.get("seconds") or {}
    seconds = (_measured_seconds(measured, detector_key(det), machine, n_images, f"images at {batch} a call",
                                 batch=batch)
               or _measured_seconds(measured, detector_key(det), machine, n_images, "images") or Figure(
        float(secs.get("load", 10)) + n_images * float(secs.get("per_image", 1.0)), "estimate: models.yaml seconds"))
    vram, devices = _card(facts, measured, machine, det["device"], detector_key(det), estimate,
                          weights_gib(facts, name, "fp32"), process_kind("detector", "fp32"), batched=batched)
    return Ask(vram=vram, ram=ram, seconds=seconds, devices=devices, model=name, batch=batch)


def scorer_ask(
    facts: dict, scorer: dict, *, n_views: int = 1, num_pass: int = 1, batch: int = 1,
    measured: Measurements | None = None, machine: str = "desk", instruction: str | None = None,
) -> Ask:
    """One grades job: the Qwen3-VL-8B scorer (the LoRA adapter's few MB not counted) at its precision, `batch`
    questions a call (a one-question call's peak, measured or estimated, plus one grading prompt's activations for
    each further question). `instruction`: the job's edit instruction, which EditScore's SC question quotes (None:
    the longest allowed)."""
    name = "qwen3_vl_8b"
    model = facts["models"][name]
    precision = scorer["precision"]
    batch = max(1, int(batch))
    prompt = _scorer_prompt(model, scorer, instruction)
    if prompt is not None:  # a further question holds its own prompt's activations (and its answer's cache)
        tokens, size, said, per_token = prompt
        item = Figure(tokens * per_token, f"{tokens} prompt tokens ({size} px images{said}) x {per_token:g} GiB "
                                          f"(models.yaml)")
    else:
        item = batch_item_gib(facts, name, int(scorer.get("image_size", 512)))
    batched = batch_raise(batch, item, "question(s)")

    def one() -> Figure:
        if prompt is not None:  # the pass at the grading prompt's length, over the loaded weights
            tokens, size, said, per_token = prompt
            rows = [r for r in model.get("measured") or [] if r.get("mode") == "weights"
                    and r.get("precision") == precision and not r.get("resident")]
            if rows:
                row = max(rows, key=lambda r: float(r["gib"]))
                weights = Figure(float(row["gib"]), f"measured weights: {row['source']}")
            else:
                gib = estimate_vram_gib(facts, name, mode="weights", precision=precision)[0]
                weights = Figure(gib, f"estimate: weights ({precision}) {gib:.2f}")
            return Figure(weights.value + tokens * per_token,
                          f"{weights.source} + {tokens} prompt tokens ({size} px images{said}) x {per_token:g} GiB "
                          f"(models.yaml)")
        row = seed_row(facts, name, precision=precision, resolution=512)
        if row is not None:
            return row
        gib, parts = estimate_vram_gib(facts, name, mode="inference", precision=precision, resolution=512)
        return Figure(gib, "estimate: " + " + ".join(f"{k} {v:.2f}" for k, v in parts.items()))

    def estimate() -> Figure:
        return batched(one()) if batched else one()

    vram, devices = _card(facts, measured, machine, scorer["device"], scorer_key(scorer), estimate,
                          weights_gib(facts, name, precision), process_kind("scorer", precision),
                          floor="of another question", batched=batched)  # the key names no image size, no prompt
    ram = _loading_ram(facts, model)
    secs = model.get("seconds") or {}
    per = float(secs.get("per_image", 36))
    # a score is the SC and the PQ question: the probe times each, at this batch where it ran one (a batch is
    # faster a question), else one question a call
    seconds = None
    for at, what in (({"batch": batch}, f" at {batch} a call"), ({}, "")):
        sc = _measured_seconds(measured, scorer_key(scorer), machine, n_views * num_pass, f"SC questions{what}",
                               question="SC", **at)
        pq = measured.timing(scorer_key(scorer), machine, question="PQ", **at) if sc is not None else None
        if sc is not None and pq is not None:
            seconds = Figure(sc.value + n_views * num_pass * pq[1],
                             f"{sc.source} + as many PQ questions{what} x {pq[1]:g} s")
            break
    if seconds is None:
        seconds = Figure(float(secs.get("load", 60)) + n_views * num_pass * per,
                         f"estimate: load + {n_views} views x {num_pass} passes x {per:g} s (models.yaml seconds)")
    return Ask(vram=vram, ram=ram, seconds=seconds, devices=devices, model=name, batch=batch)


def _scorer_prompt(model: dict, scorer: dict, instruction: str | None) -> tuple[int, int, str, float] | None:
    """(tokens, image size, what the count holds, GiB a token) of the grading prompt a question of this job puts
    through the scorer; None where models.yaml has no prompt length or no activations a token."""
    tokens, per_token = model.get("prompt_tokens"), model.get("activations_gib_per_prompt_token")
    if not tokens or per_token is None:
        return None
    # the prompt was measured with its images at prompt_image_size; each image is one visual token per
    # pixels_per_visual_token^2 pixels (patch x spatial merge), so larger images lengthen the prompt
    size, per_px = int(scorer.get("image_size", 512)), model.get("pixels_per_visual_token")
    if per_px:  # facts without it count the prompt as measured, whatever the images' size
        at = int(model.get("prompt_image_size", 512))
        tokens = int(tokens) + int(model.get("prompt_images", 2)) * ((size // int(per_px)) ** 2
                                                                     - (at // int(per_px)) ** 2)
    said = ""
    per_byte = model.get("instruction_tokens_per_byte")
    if per_byte is not None:  # prompt_tokens is the question without its instruction: add the job's
        from fourloops.config import MAX_INSTRUCTION_BYTES

        n_bytes = MAX_INSTRUCTION_BYTES if instruction is None else len(str(instruction).encode("utf-8"))
        tokens = int(tokens) + math.ceil(n_bytes * float(per_byte))
        said = f", instruction {n_bytes} bytes" + (" (the longest allowed)" if instruction is None else "")
    return tokens, size, said, float(per_token)


def lora_key(job: dict) -> str:
    resident = "+".join(lora_resident(job))
    return f"lora_step/{job['backend']}/{job['frozen_dtype']}/{resident}/{job['resolution']}"


def lora_resident(job: dict) -> list[str]:
    """The components on the card during a LoRA step: the transformer, and the text encoder when resident."""
    return ["transformer"] + (["text_encoder"] if job.get("text_encoder") == "resident" else [])


def _lora_row(model: dict, frozen_dtype: str, resident: list[str], resolution: int) -> Figure | None:
    """The largest measured lora_step row of exactly this setup (the walls take the worst seen)."""
    rows = [r for r in model.get("measured") or [] if r.get("mode") == "lora_step"
            and r.get("frozen_dtype") == frozen_dtype and sorted(r.get("resident") or []) == sorted(resident)
            and r.get("resolution") == resolution]
    if not rows:
        return None
    row = max(rows, key=lambda r: float(r["gib"]))
    return Figure(float(row["gib"]), f"measured: {row['source']}")


def lora_ask(facts: dict, job: dict, *, batch: int = 1, measured: Measurements | None = None,
             machine: str = "desk") -> Ask:
    """One LoRA training job: the frozen transformer at its dtype, the text encoder only when resident, the
    step's activations at the resolution, the autocast casts when frozen weights are fp32 (models.yaml); `batch`
    samples a forward: a one-sample step's ask plus `lora_batch_item_gib` for each further sample (what a sample
    adds to the driver's peak, the pool's slack with it, so no process reserve is laid on it), else a one-sample
    step's peak plus a step's activations for each further sample, with the process's reserve over all of it."""
    name = job["backend"]
    model = facts["models"][name]
    frozen, res = job["frozen_dtype"], int(job["resolution"])
    resident = lora_resident(job)
    batch = max(1, int(batch))
    batched = batch_raise(batch, batch_item_gib(facts, name, res, "lora_batch_item_gib", "lora_step"), "sample(s)")
    at_driver = bool(model.get("lora_batch_item_gib"))  # the items' table holds their slack: no reserve over them
    before_context, after_context = (None, batched) if at_driver else (batched, None)

    rank = int(job.get("rank", 8))
    per_rank = float(model.get("lora_gib_per_rank", 0.0))

    def estimate() -> Figure:
        # the adapters and their optimizer state grow with the rank; the measured steps were made at ranks 8 to 32,
        # so this counts theirs twice (at most 32 x lora_gib_per_rank high: a wall errs high)
        adapters = Figure(rank * per_rank, f"adapters at rank {rank} {rank * per_rank:.3f} (models.yaml lora_gib_per_rank)")
        row = _lora_row(model, frozen, resident, res)
        if row is not None:
            fig = Figure(row.value + adapters.value, f"{row.source} + {adapters.source}")
        else:
            gib, parts = estimate_vram_gib(facts, name, mode="lora_step", frozen_dtype=frozen, resident=resident,
                                           resolution=res)
            fig = Figure(gib + adapters.value, "estimate: " + " + ".join(f"{k} {v:.2f}" for k, v in parts.items())
                         + f" + {adapters.source}")
        return before_context(fig) if before_context else fig

    frozen_weights = (weights_gib(facts, name, frozen, ["transformer"])
                      + (weights_gib(facts, name, model.get("lora_text_encoder_dtype", "bf16"), ["text_encoder"])
                         if "text_encoder" in resident else 0.0))
    seen = measured.ranks.get(lora_key(job), 0) if measured is not None else 0  # 0: no record named its rank
    vram, devices = _card(facts, measured, machine, job["device"], lora_key(job), estimate, frozen_weights,
                          "training", res, floor=f"at rank {seen or 'unknown'}" if seen < rank else None,
                          batched=before_context, batched_after=after_context)
    ram = _loading_ram(facts, model, {"transformer": "fp32"} if frozen == "fp32" else None)
    secs = model.get("seconds") or {}
    table = {int(k): float(v) for k, v in (secs.get("per_lora_step_by_resolution") or {}).items()}
    accumulation, steps = int(job["accumulation"]), int(job["steps"])
    if table:
        ref = min(table, key=lambda r: abs(r - res))
        per = table[ref] * (res / ref) ** 2 * accumulation / 8
        why = f"{table[ref]:g} s a step at {ref} px x 8 micro-steps (models.yaml seconds), scaled to {res} px x {accumulation}"
    else:
        per, why = 10.0 * accumulation / 8, "NOT measured for this backend: 10 s a step of 8 micro-steps assumed"
    # this machine's probe times a sample: at this micro-batch where it measured one, else at one sample a forward
    # (a micro-batch is faster a sample); a step is `accumulation` samples
    seconds = (_measured_seconds(measured, lora_key(job), machine, steps * accumulation,
                                 f"samples at {batch} a forward", batch=batch)
               or _measured_seconds(measured, lora_key(job), machine, steps * accumulation, "micro-steps")
               or Figure(float(secs.get("load", 60)) + steps * per, f"estimate: load + {steps} steps x {per:.2f} s ({why})"))
    return Ask(vram=vram, ram=ram, seconds=seconds, devices=devices, model=name, batch=batch)


def text_encoder_key(job: dict) -> str:
    return f"text_encoder/{job['backend']}/{job['text_encoder_dtype']}"


def text_encoder_ask(facts: dict, job: dict, *, n_prompts: int = 1, measured: Measurements | None = None,
                     machine: str = "desk") -> Ask:
    """The instruction embeddings job: the generator's text encoder alone on the card (its probe on the target
    machine, else a measured weights row of it, else its weights at the job's dtype), nothing else of the generator."""
    name = job["backend"]
    model = facts["models"][name]
    dtype = job["text_encoder_dtype"]

    def estimate() -> Figure:
        rows = [r for r in model.get("measured") or [] if r.get("mode") == "weights"
                and (r.get("resident") or []) == ["text_encoder"] and r.get("precision") == dtype]
        if rows:
            row = max(rows, key=lambda r: float(r["gib"]))
            return Figure(float(row["gib"]), f"measured: {row['source']}")
        gib = component_gib(facts, model, "text_encoder", dtype)
        return Figure(gib, f"estimate: text_encoder ({dtype}) {gib:.2f}")

    key = text_encoder_key(job)
    vram, devices = _card(facts, measured, machine, job["device"], key, estimate,
                          weights_gib(facts, name, dtype, ["text_encoder"]), process_kind("text_encoder", dtype))
    te = component_gib(facts, model, "text_encoder", "bf16")
    host = float(facts["stages"]["generate_host_gib"])
    ram = Figure(te + host, f"estimate: the text encoder's bf16 weights {te:.2f} + host {host:g}")
    secs = model.get("seconds") or {}
    seconds = _measured_seconds(measured, key, machine, n_prompts, "prompts") or Figure(
        float(secs.get("load", 60)) + 0.5 * n_prompts, f"estimate: load + {n_prompts} prompts x 0.5 s")
    return Ask(vram=vram, ram=ram, seconds=seconds, devices=devices, model=name)


def stage_ask(facts: dict, stage: str) -> Ask:
    """A job that loads no model onto a card: its RAM and time from models.yaml `stages`."""
    s = facts["stages"].get(stage) or facts["stages"]["default"]
    return Ask(
        vram=Figure(0.0, "no model on a card"),
        ram=Figure(float(s["ram_gib"]), s["source"]),
        seconds=Figure(float(s.get("seconds", 10)), s["source"]),
    )


def recorded_ask(facts: dict, name: str, *, licensed: tuple[str, ...] = (), devices: tuple[str, ...] = ("cuda",)) -> Ask:
    """A job whose asks are recorded measurements only (the DFC optimize of RFD 1165)."""
    rec = facts["models"][name]["recorded"]
    return Ask(
        vram=Figure(float(rec["vram_gib"]), f"measured: {rec['source']}"),
        ram=Figure(float(rec["ram_gib"]), f"measured: {rec['source']}"),
        seconds=Figure(float(rec.get("seconds", 2640)), "RFD 1165: 44 minutes to raise at batch 1"),
        devices=devices,
        licensed=licensed,
        model=name,
    )



# ------------------------------------------------------------------------------------- offload
def offload_ask(facts: dict, gen: dict, ask: Ask) -> Ask | None:
    """The generate job `ask` with model CPU offload (a lever the wall check offers; generate loads every
    component on the card today): models.yaml `offload` says how it is modelled and where its slowdown comes
    from. VRAM: the largest component at the job's precision + activations at its size + the CUDA context;
    RAM: every component waits in host memory at its precision (or the streamed bf16 copy, if larger);
    time: the ask's x `offload.slowdown`. None: no offload facts, a recorded model, one component, or no card."""
    off = facts.get("offload")
    name = gen["backend"]
    model = facts["models"][name]
    comps = list(model.get("components") or {})
    if not off or "recorded" in model or len(comps) < 2 or not _cuda(gen["device"]):
        return None
    precision, size = gen["precision"], int(gen["size"])
    largest = max(comps, key=lambda c: component_gib(facts, model, c, precision))
    gib, parts = estimate_vram_gib(facts, name, mode="inference", precision=precision, resident=[largest],
                                   resolution=size)
    vram = with_context(facts, Figure(gib, "estimate, offload (models.yaml offload): "
                                       + " + ".join(f"{k} {v:.2f}" for k, v in parts.items())),
                         process_kind("generator", precision),
                         weights_gib=weights_gib(facts, name, precision, [largest]))
    host = float(facts["stages"]["generate_host_gib"])
    held = sum(component_gib(facts, model, c, precision) for c in comps) + host
    ram = ask.ram if ask.ram.value >= held else Figure(
        held, f"estimate, offload: every component in host memory at {precision} {held - host:.2f} + host {host:g}")
    slow = float(off["slowdown"])
    seconds = Figure(ask.seconds.value * slow, f"{ask.seconds.source} x {slow:g} offload ({off['source']})")
    return Ask(vram=vram, ram=ram, seconds=seconds, os=ask.os, arch=ask.arch, devices=ask.devices,
               licensed=ask.licensed, model=ask.model)
