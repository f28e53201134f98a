"""What would make a refused job fit: its levers, each re-asked through the job's own stage ask.

A lever is one change to the job's configuration, or to where it runs, that the same ask functions
re-evaluate (RFD 1165: a lever pushed to its stop is not a lever, and finding that out by waiting cost 44
minutes). For a refused job:

- where it runs, unchanged: every machine of config/machines.yaml (desk, pod, SLURM partitions), and the
  pod on each GPU class of `pod.gpu_classes` / `pod.runpod.widen_gpus` with more memory than the pod's wall;
- each config knob the job's stage declares (`Stage.knobs`, in its order: generator precision and size, the
  scorer's precision, the detector's resolution, the LoRA's text encoder, frozen dtype and resolution), each
  value milder than its stop tried in turn through the stage's own `ask`;
- model CPU offload for a multi-component generator (fourloops.asks.offload_ask: models.yaml `offload`);
- when no single knob fits the target, all of them at their stops together.

Each lever carries the figures it would then ask, the machines it would then fit (every wall checked, as
the wall check does) and its time and cost. A job whose figures are recorded rather than modelled (the DFC)
has only the where-it-runs levers. Computed only for refused jobs: the dry-run pays nothing otherwise.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import copy
import functools
from dataclasses import dataclass, replace
from pathlib import Path

from fourloops import machines as machines_mod
from fourloops import walls
from fourloops.asks import GIB, Ask
from fourloops.machines import Machine
from fourloops.stage import Knob, stage_for
from fourloops.tables import format_table
from fourloops.tables import gib as _gib
from fourloops.tables import hms as _hms

GB = 10**9  # machines.yaml: GiB = 2^30, GB = 10^9 (the GPU classes' vram_gb)
REPO = Path(__file__).resolve().parents[2]
SCHEDULER = walls.WALL_NAMES["scheduler"]




@dataclass(frozen=True)
class Place:
    """A machine the job could run on: its walls, its price (None: machines.yaml gives none)."""

    label: str
    machine: Machine
    hourly_usd: float | None
    here: bool
    partition: object = None  # a fourloops.machines.Partition: its time limit is a wall too
    note: str = ""
    home: bool = False  # the machine the job's profile tag names (a pod job's pod): its refusal is shown too


@dataclass(frozen=True)
class Lever:
    name: str
    kind: str  # placement | gpu_class | precision | size | batch | setting | offload | together
    ask: Ask | None  # None: nothing to re-ask (no larger GPU class configured)
    fits: tuple[str, ...]  # labels of the places where every wall fits, the target first
    here: bool  # fits the machine the job was checked on
    seconds: float | None
    hourly_usd: float | None  # at the first place it fits
    miss: str  # where it is still refused and by what (the target's rows, else the nearest miss)
    note: str = ""
    nearest: str = ""  # the place it misses by least, and by what
    shortfall: float = float("inf")  # that miss: worst asked/available of its memory walls (inf: not memory)

    @property
    def cost_usd(self) -> float | None:
        if self.seconds is None or self.hourly_usd is None:
            return None
        return self.seconds / 3600.0 * self.hourly_usd

    def as_dict(self) -> dict:
        a = self.ask
        return {
            "lever": self.name, "kind": self.kind, "fits": list(self.fits), "here": self.here,
            "vram_gib": None if a is None else round(a.vram_mb / 1024.0, 2),
            "vram_source": None if a is None else a.vram.source,
            "ram_gib": None if a is None else round(a.mem_mb / 1024.0, 2),
            "ram_source": None if a is None else a.ram.source,
            "seconds": None if self.seconds is None else round(self.seconds, 1),
            "seconds_source": None if a is None else a.seconds.source,
            "hourly_usd": self.hourly_usd,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 4),
            "still_refused": self.miss, "note": self.note,
        }


@dataclass(frozen=True)
class Levers:
    job: walls.PendingJob
    target: str
    levers: tuple[Lever, ...]
    notes: tuple[str, ...]
    summary: str  # the verdict line: which levers reach it, or "no lever reaches it" with the nearest miss

    @property
    def reaches(self) -> bool:
        return any(lv.fits for lv in self.levers)

    @property
    def short(self) -> str:
        """One phrase for a plan row: the first lever that fits here, else the first that fits anywhere."""
        for lv in sorted((lv for lv in self.levers if lv.fits), key=lambda lv: not lv.here):
            where = "here" if lv.here else lv.fits[0]
            return f"lever: {lv.name}" + ("" if lv.kind in ("placement", "gpu_class") else f" ({where})")
        return "no lever reaches it"

    def as_dict(self) -> dict:
        return {"levers": [lv.as_dict() for lv in self.levers], "notes": list(self.notes), "summary": self.summary,
                "short": self.short, "reaches": self.reaches}


# ------------------------------------------------------------------------------------- helpers
@functools.lru_cache(maxsize=1)
def _config_schema() -> dict:
    from fourloops.config import schema_with_slices

    return schema_with_slices(REPO / "config" / "schema.yaml", REPO / "config" / "schema.d")


def _schema_of(config_key: tuple[str, ...]) -> dict:
    node = _config_schema()
    for part in config_key:
        node = (node.get("properties") or {}).get(part) or {}
    return node


def _lookup(data, path: tuple[str, ...]):
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def _with(params: dict, changes: list[tuple[tuple[str, ...], str, object]]) -> dict:
    out = copy.deepcopy(params)
    for where, key, value in changes:
        _lookup(out, where)[key] = value
    return out


def _fits(job: walls.PendingJob, ask: Ask, place: Place) -> tuple[bool, list[walls.Row]]:
    probe = replace(job, ask=ask)
    if place.partition is not None:
        from fourloops import slurm

        rows = slurm.rows(probe, place.partition)
    else:
        rows = walls.check_job(probe, place.machine)
    refused = [r for r in rows if not r.ok and r.wall != SCHEDULER]
    return not refused, refused


def _shortfall(rows: list[walls.Row]) -> float:
    """How far a refusal is from fitting: the worst asked/available ratio of its memory walls (inf: a wall
    no amount of memory moves, such as a missing licence or device)."""
    worst = 1.0
    for r in rows:
        try:
            asked, avail = float(r.asked.split()[0]), float(r.available.split()[0])
        except (ValueError, IndexError):
            return float("inf")
        worst = max(worst, asked / avail if avail > 0 else float("inf"))
    return worst


def _why(place: Place, rows: list[walls.Row], here: bool = False) -> str:
    where = f"here ({place.label})" if here else place.label
    def one(r: walls.Row) -> str:
        return f"{r.wall} {r.asked} > {r.available}" if _shortfall([r]) < float("inf") else \
            f"{r.wall} {r.asked} (there: {r.available})"

    return f"{where}: " + ", ".join(one(r) for r in rows)


# ------------------------------------------------------------------------------------- where it runs
def _here_names(table: dict, target: str, job: walls.PendingJob, placement: dict | None) -> set[str]:
    if target in machines_mod.clusters(table):
        return {p.machine.name for p in machines_mod.cluster(table, target).partitions}
    return {walls.target_for(job, table, target, placement).name}


def _card_price(card: dict) -> float | None:
    for key in ("secure_usd", "community_usd"):
        if card.get(key) is not None:
            return float(card[key])
    return None


def places(job: walls.PendingJob, table: dict, target: str, placement: dict | None = None) -> tuple[list[Place], list[Place], str]:
    """(every configured machine, the pod on each larger GPU class, a line on the pod's GPU classes)."""
    here = _here_names(table, target, job, placement)
    runpod_tags = sorted(machines_mod.placement("runpod", table))
    out: list[Place] = []
    for name in machines_mod.placeable(table):
        m = walls.target_for(job, table, name)
        note = ""
        if name == "pod" and m.name not in here and job.profile not in runpod_tags:
            note = (f"profiles/pod sends only {', '.join(runpod_tags)} jobs to the pod"
                    + ("; container jobs go there with container.host: pod in machines.yaml (the executor builds the DFC's "
                       "venv from hef.dfc_wheel)"
                       if job.profile == "container" else "")
                    + f"; or run the workflow there (--config machine={name})")
        home = name == machines_mod.home(table, job.profile)
        out.append(Place(m.name, m, m.hourly_usd, m.name in here, note=note, home=home))
    for cname in machines_mod.clusters(table):
        for p in machines_mod.cluster(table, cname).partitions:
            out.append(Place(p.machine.name, p.machine, None, p.machine.name in here, partition=p,
                             note=f"--config machine={cname} (the partition fourloops.slurm chooses)"))
    pod_raw = table.get("pod") if "pod" in machines_mod.names(table) else None
    if not pod_raw:
        return out, [], ""
    base = walls.target_for(job, table, "pod")
    cards = {c["id"]: c for c in list(pod_raw.get("small_cards") or []) + list(pod_raw.get("gpu_classes") or [])}
    ids = machines_mod.pod_gpus(pod_raw)
    larger, sizes, unknown = [], [], []
    for gpu in ids:
        card = cards.get(gpu)
        if card is None:
            unknown.append(gpu)
            continue
        measured = gpu == base.gpu_name  # the pod's own card: its wall (measured) beats the listing's nominal GB
        gib = base.vram_gib if measured else float(card["vram_gb"]) * GB / GIB
        sizes.append((gib, gpu, f"{_gib(gib)} (the pod's card)" if measured else f"{card['vram_gb']:g} GB = {_gib(gib)}"))
        if gib > base.vram_gib:
            m = replace(base, name=f"{base.name} on {gpu}", gpu_name=gpu, vram_gib=gib,
                        hourly_usd=_card_price(card) or 0.0)
            larger.append(Place(m.name, m, _card_price(card), False,
                                note=f"pod.gpu_classes / runpod.widen_gpus listing only {gpu}"))
    line = ""
    if not larger:
        top = max(sizes, default=None, key=lambda s: s[0])
        line = (f"none of pod.gpu_classes + runpod.widen_gpus has more than the pod's {_gib(base.vram_gib)}"
                + (f" (largest: {top[1]}, {top[2]})" if top else "")
                + f"; the job asks {_gib(job.ask.vram_mb / 1024.0)}")
        if unknown:
            line += f"; no memory in machines.yaml for {', '.join(unknown)} (give each a gpu_classes entry)"
    return out, larger, line


# ------------------------------------------------------------------------------------- the levers
def _evaluate(job, ask: Ask, every: list[Place], name: str, kind: str, note: str = "",
              shown: frozenset = frozenset()) -> Lever:
    """`ask` against every place: where it fits (the target first, then the cheapest), where it is still refused.
    `shown`: places whose how-to-get-there note an earlier row carries already."""
    fits, misses = [], []
    for place in every:
        ok, rows = _fits(job, ask, place)
        if ok:
            fits.append(place)
        else:
            misses.append((_shortfall(rows), place, rows))
    # still refused: here (the closest of a cluster's partitions, unless one fits) and on the job's own machine
    here = [m for m in misses if m[1].here] if not any(p.here for p in fits) else []
    still = [min(here, key=lambda m: m[0])] if here else []
    still += [m for m in misses if m[1].home and not m[1].here]
    shown_misses = [_why(place, rows, here=place.here) for _, place, rows in still]
    fits.sort(key=lambda p: (not p.here, p.hourly_usd is None, p.hourly_usd or 0.0, p.label))
    shortfall, nearest = float("inf"), ""
    if misses:
        shortfall, place, rows = min(misses, key=lambda x: x[0])
        nearest = _why(place, rows)
    if shown_misses:
        miss = "; ".join(shown_misses)
    else:
        miss = "" if fits else nearest
    first = fits[0] if fits else None
    notes = [note, first.note if first is not None and not first.here and first.label not in shown else ""]
    return Lever(name, kind, ask, tuple(p.label for p in fits), bool(first and first.here), ask.seconds.value,
                 first.hourly_usd if first else None, miss, "; ".join(n for n in notes if n), nearest, shortfall)


def _candidates(knob: Knob, params: dict, facts: dict, model: str) -> list[object]:
    """The knob's allowed values milder-to-stronger than its current one (config schema; bytes_per_param)."""
    holder = _lookup(params, knob.where)
    current = holder[knob.key]
    if knob.values:  # the stage's own list, mildest first
        return [v for v in knob.values if v != current]
    if knob.kind == "batch":  # halves of a batch asked for by number; `auto` is already the largest that fits
        if not isinstance(current, int) or isinstance(current, bool):
            return []
        out, b = [], int(current) // 2
        while b >= 1:
            out.append(b)
            b //= 2
        return out
    spec = _schema_of(knob.config)
    if knob.kind == "precision":
        size = facts["bytes_per_param"]
        fmt = ((facts["models"].get(model) or {}).get("nf4_format")) or "nf4"
        bytes_of = lambda p: size.get(fmt if p == "nf4" else p, float("inf"))  # noqa: E731
        allowed = [p for p in spec.get("enum") or [] if p in size]
        if not str(holder.get("device", "cuda")).startswith("cuda"):  # nf4 is bitsandbytes on CUDA (config check)
            allowed = [p for p in allowed if p != "nf4"]
        return sorted((p for p in allowed if bytes_of(p) < bytes_of(current)), key=bytes_of, reverse=True)
    step = int(spec.get("multipleOf") or 1)
    low = int(spec.get("minimum") or step)
    return list(range(int(current) - step, low - 1, -step))


def _knob_lever(job, knob: Knob, facts: dict, every: list[Place], as_is: set[str]) -> tuple[Lever, object] | None:
    """The mildest value that fits the target, else the mildest that fits somewhere the job does not fit as it
    is, else the knob at its stop; None when no value changes what the job asks."""
    stage_ask = _stage_ask(job)
    found = []
    for value in _candidates(knob, job.params, facts, job.ask.model):
        ask = stage_ask(_with(job.params, [(knob.where, knob.key, value)]))
        if (ask.vram_mb, ask.mem_mb) == (job.ask.vram_mb, job.ask.mem_mb):
            continue
        lever = _evaluate(job, ask, every, f"{'.'.join(knob.config)}: {value}", knob.kind, shown=frozenset(as_is))
        if lever.here:
            return lever, value
        found.append((lever, value))
    for lever, value in found:
        if set(lever.fits) - as_is:
            return lever, value
    return found[-1] if found else None


def _stage_ask(job: walls.PendingJob):
    stage = stage_for(job.rule)
    return lambda params: stage.ask_for(job.context, job.wildcards, params)


def find(job: walls.PendingJob, table: dict, target: str, placement: dict | None = None) -> Levers:
    """The levers of one refused job checked against `target` (the verdict's machine, or a SLURM cluster)."""
    every, larger, gpu_line = places(job, table, target, placement)
    levers: list[Lever] = []
    notes: list[str] = []
    # where it runs, unchanged
    as_is = set()
    for place in every + larger:
        if place.here:
            continue
        m = place.machine
        card = f"{m.gpu_name} {m.vram_gib:.4g} GiB" if m.gpu_name else "no GPU"
        lever = _evaluate(job, job.ask, [place], f"run on {place.label} ({card})",
                          "gpu_class" if place in larger else "placement")
        if lever.fits:
            as_is.add(place.label)
            levers.append(lever)
    pod = walls.target_for(job, table, "pod") if "pod" in machines_mod.names(table) else None
    if gpu_line and pod is not None and job.ask.vram_mb / 1024.0 > pod.vram_gib:  # the pod's card is a wall
        levers.append(Lever("pod GPU class", "gpu_class", None, (), False, None, None, gpu_line))
    # what it asks: the knobs its params carry, offload, and all of them together
    facts = job.context.facts if job.context is not None else None
    model = (facts or {}).get("models", {}).get(job.ask.model) if facts else None
    if facts is None or job.params is None:
        notes.append("only where it runs was re-checked: the job carries no params to re-ask")
    elif model is not None and "recorded" in model:
        notes.append(f"precision, resolution and batch are not levers here: {job.ask.model}'s figures are recorded "
                     f"(measured: {model['recorded']['source']}), not modelled")
    else:
        everywhere = every + larger
        stops = []
        for knob in stage_for(job.rule).knobs_for(job.wildcards or {}):
            holder = _lookup(job.params, knob.where)
            if not isinstance(holder, dict) or knob.key not in holder:
                continue
            got = _knob_lever(job, knob, facts, everywhere, as_is)
            if got is not None:
                levers.append(got[0])
                last = _candidates(knob, job.params, facts, job.ask.model)
                stops.append((knob, last[-1] if last else got[1]))
        from fourloops import asks

        at = stage_for(job.rule).offload_for(job.wildcards or {})  # where its params carry a generator's settings
        gens = [at] if at is not None and isinstance(_lookup(job.params, at), dict) else []
        offload = asks.offload_ask(facts, _lookup(job.params, gens[0]), job.ask) if gens else None
        schema_has = "offload" in (_schema_of(("generator",)).get("properties") or {})
        off = facts.get("offload") or {}
        why = "; ".join(x for x in (
            f"time x{float(off['slowdown']):g} ({off['source']})" if off else "",
            "" if schema_has else "generator has no offload setting yet (config/schema.yaml)") if x)
        if offload is not None and offload.vram_mb < job.ask.vram_mb:
            levers.append(_evaluate(job, offload, everywhere, "offload", "offload", why, frozenset(as_is)))
        model_levers = [lv for lv in levers if lv.kind in ("precision", "size", "setting", "offload", "batch")]
        if len(model_levers) >= 2 and not any(lv.here for lv in model_levers):
            params = _with(job.params, [(k.where, k.key, v) for k, v in stops])
            together = _stage_ask(job)(params)
            names = [f"{'.'.join(k.config)}: {v}" for k, v in stops]
            if offload is not None and gens:
                more = asks.offload_ask(facts, _lookup(params, gens[0]), together)
                if more is not None and more.vram_mb < together.vram_mb:
                    together, names = more, names + ["offload"]
            if len(names) >= 2:
                levers.append(_evaluate(job, together, everywhere, "together: " + " + ".join(names), "together",
                                        why if "offload" in names else "", frozenset(as_is)))
    return Levers(job, target, tuple(levers), tuple(notes), _summary(levers, as_is))


def _summary(levers: list[Lever], as_is: set[str]) -> str:
    """Which levers reach it (here first; elsewhere only those that open a place the job does not fit as it
    is), or "no lever reaches it" with the nearest miss."""
    here = [lv for lv in levers if lv.here]
    if here:
        return "reaches it here: " + "; ".join(lv.name for lv in here)
    reach = [lv for lv in levers if lv.fits and (lv.kind in ("placement", "gpu_class") or set(lv.fits) - as_is)]
    if reach:
        return "reaches it elsewhere: " + "; ".join(
            lv.name if lv.kind in ("placement", "gpu_class") else f"{lv.name} ({', '.join(sorted(set(lv.fits) - as_is))})"
            for lv in reach)
    tried = [lv for lv in levers if lv.ask is not None and lv.nearest]
    if not tried:
        return "no lever reaches it"
    best = min(tried, key=lambda lv: lv.shortfall)
    return f"no lever reaches it; nearest: {best.name} on {best.nearest}"


def _cost(lv: Lever) -> str:
    if lv.seconds is None:
        return "-"
    out = _hms(lv.seconds)
    if not lv.fits:
        return out
    if lv.hourly_usd is None:
        return out + ", no price in machines.yaml"
    return out + (f", ${lv.hourly_usd:.2f}/h = ${lv.cost_usd:.2f}" if lv.hourly_usd else ", $0")


def format_levers(found: Levers, indent: str = "  ") -> str:
    rule = found.job.rule
    head = ("lever", "video memory", "system memory", "then fits", "time, cost", "still refused; note")
    rows = []
    for lv in found.levers:
        vram = "-" if lv.ask is None else _gib(lv.ask.vram_mb / 1024.0)
        ram = "-" if lv.ask is None else _gib(lv.ask.mem_mb / 1024.0)
        fits = ", ".join(f"{f} (here)" if i == 0 and lv.here else f for i, f in enumerate(lv.fits)) or "nowhere"
        rows.append((lv.name, vram, ram, fits, _cost(lv), "; ".join(x for x in (lv.miss, lv.note) if x)))
    out = [f"{indent}levers (each re-asked through rule {rule}'s own ask, every wall checked):"]
    if rows:
        out.append(format_table(head, rows, indent=indent))
    out += [indent + n for n in found.notes]
    out.append(indent + found.summary)
    return "\n".join(out)
