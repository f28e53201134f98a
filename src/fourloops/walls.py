"""Walls before work: every job of the requested DAG against the target machine, before any starts.

One table per refused job group in RFD 1165's form (wall, asked, available, verdict, source of the
asked figure), plus where the job would fit. Snakemake silently caps a resource ask above
`--resources`; this check refuses instead. Snakemake glue lives in fourloops.smk.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from dataclasses import dataclass, field

from fourloops.asks import Ask
from fourloops.stage import AskContext
from fourloops.machines import Machine, cluster, clusters, machine, names
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
class PendingJob:
    """One job the run would execute: where its rule says it runs, and what it asks (fourloops.asks.Ask)."""

    rule: str
    output: str
    profile: str
    ask: Ask
    wildcards: dict = field(default_factory=dict)
    # what the ask was computed from, so a refusal can re-ask with a lever pulled (fourloops.levers); None: the
    # job was made by hand and only where it runs can be re-checked
    params: dict | None = None
    context: AskContext | None = None


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


def check_job(job: PendingJob, m: Machine, provided_vram_mb: int | None = None) -> list[Row]:
    """The job's rows against machine `m`: one per wall it asks something of."""
    rows: list[Row] = []
    ask = job.ask
    vram_gib, ram_gib = ask.vram_mb / 1024.0, ask.mem_mb / 1024.0
    if vram_gib > 0:
        if not m.gpu_name:
            rows.append(Row(WALL_NAMES["vram"], _gib(vram_gib), "no GPU", "refused", ask.vram.source))
        elif vram_gib > m.vram_gib:
            why = "refused (WDDM would page ~12x slower, not fail)" if m.pages_instead_of_oom else "refused"
            rows.append(Row(WALL_NAMES["vram"], _gib(vram_gib), _gib(m.vram_gib), why, ask.vram.source))
        else:
            rows.append(Row(WALL_NAMES["vram"], _gib(vram_gib), _gib(m.vram_gib), "fits", ask.vram.source))
        if provided_vram_mb is not None:
            asked_mb = int(round(vram_gib * 1024))
            verdict = "fits" if asked_mb <= provided_vram_mb else "refused (Snakemake would cap the ask and run it)"
            rows.append(Row(WALL_NAMES["scheduler"], f"{asked_mb} MiB", f"{provided_vram_mb} MiB", verdict,
                            "--resources / profile"))
    verdict = "fits" if ram_gib <= m.ram_gib else "refused"
    rows.append(Row(WALL_NAMES["ram"], _gib(ram_gib), _gib(m.ram_gib), verdict, ask.ram.source))
    if ask.os not in ("any", m.os):
        rows.append(Row(WALL_NAMES["os"], ask.os, m.os, "refused", "rule resources"))
    if ask.arch not in ("any", m.arch):
        rows.append(Row(WALL_NAMES["arch"], ask.arch, m.arch, "refused", "rule resources"))
    for dev in ask.devices:
        verdict = "fits" if dev in m.devices else "refused"
        rows.append(Row(WALL_NAMES["device"], dev, ", ".join(m.devices) or "none", verdict, "rule resources"))
    for lic in ask.licensed:
        verdict = "fits" if lic in m.licensed else "refused"
        rows.append(Row(WALL_NAMES["licensed"], lic, ", ".join(m.licensed) or "none", verdict, "rule resources"))
    return rows


def target_for(job: PendingJob, machines: dict, target: str, placement: dict | None = None) -> Machine:
    """Where a job runs: `placement` maps a profile tag to a machine (under the pod executor, `pod` jobs
    run on the pod whatever the target); a job tagged `container` runs in the container on its host;
    everything else on the target."""
    if placement and job.profile in placement:
        target = placement[job.profile]
    if job.profile == "container" and "container" in machines:
        return machine(machines, "container", host=target)
    return machine(machines, target)


def where_fits(job: PendingJob, machines: dict, exclude: str) -> list[str]:
    """The configured machines (and SLURM partitions) where the job fits as it is."""
    from fourloops import slurm

    def label(m: Machine) -> str:
        return f"{m.gpu_name} {m.vram_gib:g} GiB" if m.gpu_name else "no GPU"

    out = []
    for name in names(machines):
        if name == exclude:
            continue
        m = target_for(job, machines, name)
        if all(r.ok for r in check_job(job, m) if r.wall != WALL_NAMES["scheduler"]):
            out.append(f"fits {name}: {label(m)}" + (" (in the container)" if job.profile == "container" else ""))
    for cname in clusters(machines):
        if cname == exclude:
            continue
        for p in cluster(machines, cname).partitions:
            if all(r.ok for r in slurm.rows(job, p) if r.wall != WALL_NAMES["scheduler"]):
                out.append(f"fits {p.machine.name}: {label(p.machine)}")
    return out


@dataclass
class Verdict:
    machine: Machine
    checked: list[tuple[PendingJob, list[Row]]]
    placement: dict | None = None  # profile tag -> machine, as the jobs were checked (fourloops.machines.placement)

    @property
    def refused(self) -> list[tuple[PendingJob, list[Row]]]:
        return [(j, rows) for j, rows in self.checked if not all(r.ok for r in rows)]

    @property
    def ok(self) -> bool:
        return not self.refused


def check_jobs(
    jobs: list[PendingJob], machines: dict, target: str, provided_vram_mb: int | None = None,
    placement: dict | None = None,
) -> Verdict:
    checked = [(j, check_job(j, target_for(j, machines, target, placement), provided_vram_mb)) for j in jobs]
    return Verdict(machine(machines, target), checked, placement)


def format_table(rows: list[Row]) -> str:
    head = ("wall", "asked", "available", "verdict", "source of the asked figure")
    return _table(head, [(r.wall, r.asked, r.available, r.verdict, r.source) for r in rows], indent="  ")


def groups(verdict: Verdict) -> dict[tuple, list[tuple[PendingJob, list[Row]]]]:
    """The refused jobs by group: same rule, same rows."""
    out: dict[tuple, list[tuple[PendingJob, list[Row]]]] = {}
    for job, rows in verdict.refused:
        out.setdefault((job.rule, tuple(rows)), []).append((job, rows))
    return out


def levers_of(verdict: Verdict, machines: dict) -> dict:
    """Group key -> fourloops.levers.Levers of its first job: computed only for refused jobs, once per group,
    and only where a machine wall refuses (a --resources cap alone is the profile's to fix)."""
    from fourloops import levers

    out = {}
    for key, members in groups(verdict).items():
        job, rows = members[0]
        if any(not r.ok and r.wall != WALL_NAMES["scheduler"] for r in rows):
            out[key] = levers.find(job, machines, verdict.machine.name, verdict.placement)
    return out


def report(verdict: Verdict, machines: dict, found: dict | None = None) -> str:
    """One table per refused job group (same rule, same rows), with where the group would fit and what would
    make it fit (`found`: levers_of(verdict, machines), when the caller has computed it already)."""
    from fourloops import levers

    by_group = groups(verdict)
    found = levers_of(verdict, machines) if found is None else found
    m = verdict.machine
    n = sum(len(g) for g in by_group.values())
    out = [f"walls: {n} job(s) cannot run on {m.label()} ({m.description}); nothing was started."]
    for (rule, rows), members in by_group.items():
        outs = ", ".join(j.output for j, _ in members[:4]) + (" ..." if len(members) > 4 else "")
        out.append(f"\nrule {rule}, {len(members)} job(s): {outs}")
        out.append(format_table(list(rows)))
        fits = where_fits(members[0][0], machines, exclude=m.name)
        out.append("  " + ("; ".join(fits) if fits else "fits no configured machine"))
        if (rule, rows) in found:
            out.append(levers.format_levers(found[(rule, rows)]))
    return "\n".join(out)
