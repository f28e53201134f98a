"""Walls before work: every job of the requested DAG against the target machine, before any starts.

One table per refused job group in RFD 1165's form (wall, asked, available, verdict, source of the
asked figure): fourloops.refusal writes it, with where the job would fit and its levers. Snakemake silently
caps a resource ask above `--resources`; this check refuses instead. Snakemake glue lives in fourloops.smk.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from dataclasses import dataclass, field

from fourloops.asks import Ask
from fourloops.stage import AskContext
from fourloops.machines import Machine, machine, runs_on
from fourloops.tables import format_table as _table
from fourloops.tables import gib as _gib

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
    local: bool = False  # a rule the workflow declares local (the publication gate): under SLURM it runs where Snakemake does


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
    """Where a job runs (fourloops.machines.runs_on, for its profile tag): `placement` maps a profile tag to a
    machine (under the pod executor, `pod` jobs run on the pod whatever the target); a job tagged `container`
    runs in the container on its host; everything else on the target."""
    return runs_on(machines, job.profile, target, placement)


@dataclass
class Verdict:
    machine: Machine
    checked: list[tuple[PendingJob, list[Row]]]
    placement: dict | None = None  # profile tag -> machine, as the jobs were checked (fourloops.machines.placement)
    on: dict = field(default_factory=dict)  # job output -> the Machine its rows are of (where it was judged)

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
    # this invocation's --resources caps the jobs it runs; one the executor moves (a pod job) is capped there too,
    # by the same Snakemake: profiles/pod declares the pod's card
    on = {j.output: target_for(j, machines, target, placement) for j in jobs}
    checked = [(j, check_job(j, on[j.output], provided_vram_mb)) for j in jobs]
    return Verdict(machine(machines, target), checked, placement, on)


def format_table(rows: list[Row]) -> str:
    head = ("wall", "asked", "available", "verdict", "source of the asked figure")
    return _table(head, [(r.wall, r.asked, r.available, r.verdict, r.source) for r in rows], indent="  ")


def groups(verdict: Verdict) -> dict[tuple, list[tuple[PendingJob, list[Row]]]]:
    """The refused jobs by group: same rule, same rows."""
    out: dict[tuple, list[tuple[PendingJob, list[Row]]]] = {}
    for job, rows in verdict.refused:
        out.setdefault((job.rule, tuple(rows)), []).append((job, rows))
    return out
