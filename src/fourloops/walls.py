"""Walls before work: every job of the requested DAG against the target machine, before any starts.

One table per refused job group in RFD 1165's form (wall, asked, available, verdict, source of the
asked figure), plus where the job would fit. Snakemake silently caps a resource ask above
`--resources`; this check refuses instead. This module is Snakemake glue only in `jobs_from_dag`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fourloops.machines import Machine, card_capacity_mb, load as load_machines, machine  # noqa: F401
from fourloops.tables import format_table as _table

WALL_NAMES = {
    "vram": "video memory",
    "ram": "system memory",
    "scheduler": "--resources vram_mb",
    "os": "os",
    "arch": "arch",
    "device": "device",
    "licensed": "licensed software",
}


@dataclass(frozen=True)
class JobAsk:
    """One pending job and what it asks (from its Snakemake resources; sources from fourloops.asks)."""

    rule: str
    output: str
    profile: str
    vram_gib: float
    ram_gib: float
    os: str = "linux"
    arch: str = "x86_64"
    devices: tuple[str, ...] = ()
    licensed: tuple[str, ...] = ()
    vram_source: str = ""
    ram_source: str = ""
    seconds: float = 0.0
    seconds_source: str = ""
    reason: str = ""
    wildcards: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    wall: str
    asked: str
    available: str
    verdict: str
    source: str

    @property
    def ok(self) -> bool:
        return self.verdict.startswith("fits")


def _gib(x: float) -> str:
    return f"{x:.2f} GiB"


def check_job(job: JobAsk, m: Machine, provided_vram_mb: int | None = None) -> list[Row]:
    """The job's rows against machine `m`: one per wall it asks something of."""
    rows: list[Row] = []
    if job.vram_gib > 0:
        if not m.gpu_name:
            rows.append(Row(WALL_NAMES["vram"], _gib(job.vram_gib), "no GPU", "refused", job.vram_source))
        elif job.vram_gib > m.vram_gib:
            why = "refused (WDDM would page ~12x slower, not fail)" if m.pages_instead_of_oom else "refused"
            rows.append(Row(WALL_NAMES["vram"], _gib(job.vram_gib), _gib(m.vram_gib), why, job.vram_source))
        else:
            rows.append(Row(WALL_NAMES["vram"], _gib(job.vram_gib), _gib(m.vram_gib), "fits", job.vram_source))
        if provided_vram_mb is not None:
            asked_mb = int(round(job.vram_gib * 1024))
            verdict = "fits" if asked_mb <= provided_vram_mb else "refused (Snakemake would cap the ask and run it)"
            rows.append(Row(WALL_NAMES["scheduler"], f"{asked_mb} MiB", f"{provided_vram_mb} MiB", verdict,
                            "--resources / profile"))
    verdict = "fits" if job.ram_gib <= m.ram_gib else "refused"
    rows.append(Row(WALL_NAMES["ram"], _gib(job.ram_gib), _gib(m.ram_gib), verdict, job.ram_source))
    if job.os not in ("any", m.os):
        rows.append(Row(WALL_NAMES["os"], job.os, m.os, "refused", "rule resources"))
    if job.arch not in ("any", m.arch):
        rows.append(Row(WALL_NAMES["arch"], job.arch, m.arch, "refused", "rule resources"))
    for dev in job.devices:
        verdict = "fits" if dev in m.devices else "refused"
        rows.append(Row(WALL_NAMES["device"], dev, ", ".join(m.devices) or "none", verdict, "rule resources"))
    for lic in job.licensed:
        verdict = "fits" if lic in m.licensed else "refused"
        rows.append(Row(WALL_NAMES["licensed"], lic, ", ".join(m.licensed) or "none", verdict, "rule resources"))
    return rows


def target_for(job: JobAsk, machines: dict, target: str, placement: dict | None = None) -> Machine:
    """Where a job runs: `placement` maps a profile tag to a machine (under the pod executor, `pod` jobs
    run on the pod whatever the target); a job tagged `container` runs in the container on its host;
    everything else on the target."""
    if placement and job.profile in placement:
        target = placement[job.profile]
    if job.profile == "container" and "container" in machines:
        return machine(machines, "container", host=target)
    return machine(machines, target)


def where_fits(job: JobAsk, machines: dict, exclude: str) -> list[str]:
    out = []
    for name, raw in machines.items():
        if name == exclude or not isinstance(raw, dict) or "host" in raw:
            continue
        m = target_for(job, machines, name)
        if all(r.ok for r in check_job(job, m) if r.wall != WALL_NAMES["scheduler"]):
            gpu = f"{m.gpu_name} {m.vram_gib:g} GiB" if m.gpu_name else "no GPU"
            out.append(f"fits {name}: {gpu}" + (" (in the container)" if job.profile == "container" else ""))
    return out


@dataclass
class Verdict:
    machine: Machine
    checked: list[tuple[JobAsk, list[Row]]]

    @property
    def refused(self) -> list[tuple[JobAsk, list[Row]]]:
        return [(j, rows) for j, rows in self.checked if not all(r.ok for r in rows)]

    @property
    def ok(self) -> bool:
        return not self.refused


def check_jobs(
    jobs: list[JobAsk], machines: dict, target: str, provided_vram_mb: int | None = None,
    placement: dict | None = None,
) -> Verdict:
    checked = [(j, check_job(j, target_for(j, machines, target, placement), provided_vram_mb)) for j in jobs]
    return Verdict(machine(machines, target), checked)


def format_table(rows: list[Row]) -> str:
    head = ("wall", "asked", "available", "verdict", "source of the asked figure")
    return _table(head, [(r.wall, r.asked, r.available, r.verdict, r.source) for r in rows], indent="  ")


def report(verdict: Verdict, machines: dict) -> str:
    """One table per refused job group (same rule, same rows), with where the group would fit."""
    groups: dict[tuple, list[tuple[JobAsk, list[Row]]]] = {}
    for job, rows in verdict.refused:
        groups.setdefault((job.rule, tuple(rows)), []).append((job, rows))
    m = verdict.machine
    n = sum(len(g) for g in groups.values())
    out = [f"walls: {n} job(s) cannot run on {m.label()} ({m.description}); nothing was started."]
    for (rule, rows), members in groups.items():
        outs = ", ".join(j.output for j, _ in members[:4]) + (" ..." if len(members) > 4 else "")
        out.append(f"\nrule {rule}, {len(members)} job(s): {outs}")
        out.append(format_table(list(rows)))
        fits = where_fits(members[0][0], machines, exclude=m.name)
        out.append("  " + ("; ".join(fits) if fits else "fits no configured machine"))
    return "\n".join(out)


# ------------------------------------------------------------------------------- Snakemake glue
def _split(value) -> tuple[str, ...]:
    if value in (None, "", "none"):
        return ()
    return tuple(v for v in str(value).split(",") if v)


def jobs_from_dag(dag, ask_of=None, with_reasons: bool = False) -> list[JobAsk]:
    """JobAsks of every job the DAG would run. `ask_of(rulename, wildcards)` gives the fourloops Ask
    (for the sources); the numbers are the job's Snakemake resources, which is what the scheduler uses."""
    out = []
    for job in dag.needrun_jobs():
        res = job.resources  # already capped by Snakemake at --resources: the asks come from ask_of
        ask = ask_of(job.rule.name, job.wildcards) if ask_of else None
        if ask is not None:
            vram_mb, mem_mb = float(ask.vram_mb), float(ask.mem_mb)
            vram_src, ram_src = ask.vram.source, ask.ram.source
            secs, secs_src = ask.seconds.value, ask.seconds.source
        else:
            vram_mb, mem_mb = float(res.get("vram_mb", 0) or 0), float(res.get("mem_mb", 0) or 0)
            vram_src = ram_src = "rule resources"
            secs, secs_src = 0.0, "unknown"
        out.append(JobAsk(
            rule=job.rule.name,
            output=str(job.output[0]) if len(job.output) else job.rule.name,
            profile=str(res.get("profile", "desk")),
            vram_gib=vram_mb / 1024.0,
            ram_gib=mem_mb / 1024.0,
            os=str(res.get("os", "linux")),
            arch=str(res.get("arch", "x86_64")),
            devices=_split(res.get("devices")),
            licensed=_split(res.get("licensed")),
            vram_source=vram_src,
            ram_source=ram_src,
            seconds=secs,
            seconds_source=secs_src,
            reason=str(dag.reason(job)) if with_reasons else "",
            wildcards=dict(job.wildcards.items()),
        ))
    return out
