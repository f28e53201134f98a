"""The refusal report: one table per refused job group in RFD 1165's form (fourloops.walls' rows), where the
group would fit as it is (every machine and SLURM partition of config/machines.yaml), and its levers
(fourloops.levers). Above the walls, the placement and the levers, which it reads; the wall check itself
(fourloops.walls) knows none of them."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops import levers, slurm
from fourloops.machines import Machine, cluster, clusters, placeable
from fourloops.walls import WALL_NAMES, PendingJob, Verdict, check_job, format_table, groups, target_for


def where_fits(job: PendingJob, machines: dict, exclude: str) -> list[str]:
    """The configured machines (and SLURM partitions) where the job fits as it is."""

    def label(m: Machine) -> str:
        return f"{m.gpu_name} {m.vram_gib:g} GiB" if m.gpu_name else "no GPU"

    out = []
    for name in placeable(machines):
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


def levers_of(verdict: Verdict, machines: dict) -> dict:
    """Group key -> fourloops.levers.Levers of its first job: computed only for refused jobs, once per group,
    and only where a machine wall refuses (a --resources cap alone is the profile's to fix)."""
    out = {}
    for key, members in groups(verdict).items():
        job, rows = members[0]
        if any(not r.ok and r.wall != WALL_NAMES["scheduler"] for r in rows):
            out[key] = levers.find(job, machines, verdict.machine.name, verdict.placement)
    return out


def report(verdict: Verdict, machines: dict, found: dict | None = None) -> str:
    """One table per refused job group (same rule, same rows), with where the group would fit and what would
    make it fit (`found`: levers_of(verdict, machines), when the caller has computed it already)."""
    by_group = groups(verdict)
    found = levers_of(verdict, machines) if found is None else found

    def judged_on(job):  # the machine the executor placed the job on (a pod job on the pod), else the target
        if not verdict.placement or job.profile not in verdict.placement:
            return verdict.machine
        return target_for(job, machines, verdict.machine.name, verdict.placement)

    on = {key: judged_on(members[0][0]) for key, members in by_group.items()}
    named = list(dict.fromkeys(f"{m.label()} ({m.description})" for m in on.values()))
    n = sum(len(g) for g in by_group.values())
    out = [f"walls: {n} job(s) cannot run on {' or '.join(named)}; nothing was started."]
    for (rule, rows), members in by_group.items():
        outs = ", ".join(j.output for j, _ in members[:4]) + (" ..." if len(members) > 4 else "")
        out.append(f"\nrule {rule}, {len(members)} job(s): {outs}" + (
            f" (on {on[(rule, rows)].name})" if len(named) > 1 else ""))
        out.append(format_table(list(rows)))
        fits = where_fits(members[0][0], machines, exclude=on[(rule, rows)].name)
        out.append("  " + ("; ".join(fits) if fits else "fits no configured machine"))
        if (rule, rows) in found:
            out.append(levers.format_levers(found[(rule, rows)]))
    return "\n".join(out)


def cluster_report(placed: slurm.Placed, table: dict) -> str:
    """RFD 1165's tables for the refused jobs, headed by the cluster and its partitions."""
    text = report(placed.verdict, table)
    first, _, rest = text.partition("\n")
    n = len(placed.verdict.refused)
    return (f"walls: {n} job(s) fit no partition of {placed.cluster.label()}; nothing was submitted "
            f"(the rows are the closest partition's)." + ("\n" + rest if rest else ""))
