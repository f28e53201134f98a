"""A SLURM cluster as a target: which partition each job goes to, and how that reaches the plugin.

config/machines.yaml describes the cluster (`slurm:` partitions, their cards, RAM, time limit, and how
the cluster asks for a card). Every pending job is checked against the partitions before anything is
submitted (fourloops.admission.Admission.check_walls); the same choice becomes the job's `slurm_partition` and
gpu/gres/constraint resources (fourloops.placement.Placement.resources), so what was checked is what is asked.
A job asking a device no partition has but this machine (the cluster's `submit_host`, the desk) has runs here, as a
local rule, and so does a rule the workflow declares local (the publication gate).
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from dataclasses import dataclass

from fourloops import walls
from fourloops.asks import Ask
from fourloops.machines import Cluster, Machine, Partition, cluster, machine

EXECUTOR = "slurm"  # snakemake-executor-plugin-slurm's name


def rows(job: walls.PendingJob, p: Partition) -> list[walls.Row]:
    """The job's walls on one partition: the machine walls plus the partition's time limit."""
    out = walls.check_job(job, p.machine)
    secs = job.ask.seconds.value
    verdict = "fits" if secs <= p.time_limit_min * 60 else "refused"
    out.append(walls.Row("time limit", f"{secs / 60:.1f} min", f"{p.time_limit_min:g} min", verdict,
                         job.ask.seconds.source))
    return out


def _size(p: Partition) -> tuple:
    return (p.machine.vram_gib, p.machine.ram_gib, p.time_limit_min, p.name)


def partition_for(job: walls.PendingJob, c: Cluster) -> Partition | None:
    """The default partition when its walls fit, else the smallest that fits (None: none does)."""
    fits = [p for p in c.partitions if all(r.ok for r in rows(job, p))]
    for p in fits:
        if p.name == c.default_partition:
            return p
    return min(fits, key=_size) if fits else None


def runs_here(job: walls.PendingJob, c: Cluster) -> bool:
    """A local rule's job, or one asking a device that no partition has (the desk's Hailo USB), stays on the
    submitting machine (the cluster's submit_host)."""
    offered = {d for p in c.partitions for d in p.machine.devices}
    return job.local or any(d not in offered for d in job.ask.devices)


def request(ask: Ask, p: Partition, c: Cluster) -> dict:
    """The plugin's resources for a job placed on `p`: its partition and, for a GPU job, its card in the
    form the cluster understands (never gpu and gres together: the plugin refuses that)."""
    out: dict = {"slurm_partition": p.name}
    if ask.vram_mb > 0 or "cuda" in ask.devices:
        if c.gpu_request == "gres":
            out["gres"] = f"gpu:{p.gpu_model}:1"
        elif c.gpu_request == "constraint":
            out.update(gpu=1, constraint=p.gpu_constraint)
        else:
            out.update(gpu=1, gpu_model=p.gpu_model)
    return out


@dataclass
class Placed:
    """Where each pending job goes: a partition, here (a local rule), or nowhere (refused)."""

    cluster: Cluster
    here: Machine  # the cluster's submit_host: where its local rules run
    where: dict  # job output -> "partition <name>" | "here (<machine>)" | "refused"
    verdict: walls.Verdict

    @property
    def local_rules(self) -> set[str]:
        return {j.rule for j, _ in self.verdict.checked if self.where[j.output].startswith("here")}


def place(jobs: list[walls.PendingJob], table: dict, cluster_name: str) -> Placed:
    """Every pending job against the cluster's partitions (a desk-device job and a local rule against the machine
    Snakemake runs on, the cluster's submit_host). A refused job's rows are those of the partition it came closest
    to (fewest refused walls, then the largest)."""
    c = cluster(table, cluster_name)
    here = machine(table, c.submit_host)
    where, checked, on = {}, [], {}
    for job in jobs:
        if runs_here(job, c):
            found = walls.check_job(job, here)
            where[job.output] = f"here ({here.name})" if all(r.ok for r in found) else "refused"
            checked.append((job, found))
            on[job.output] = here
            continue
        p = partition_for(job, c)
        if p is not None:
            where[job.output] = f"partition {p.name}"
            checked.append((job, rows(job, p)))
            on[job.output] = p.machine
            continue
        closest = min(c.partitions, key=lambda q: (sum(not r.ok for r in rows(job, q)), tuple(-x for x in _size(q)[:3])))
        where[job.output] = "refused"
        checked.append((job, rows(job, closest)))
        on[job.output] = closest.machine
    as_machine = Machine(name=c.name, description=c.description + "; no partition fits", os="", arch="",
                         busy_card_limit_gib=0.0)
    placed = Placed(c, here, where, walls.Verdict(as_machine, checked, on=on))
    placed.verdict.placed = placed  # how smk and the plan tell a cluster's verdict from a machine's
    return placed
