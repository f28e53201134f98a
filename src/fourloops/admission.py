"""The checks before the first job: every pending job against the walls of the machine it runs on (its VRAM, RAM and
time; on a SLURM cluster, the partition fourloops.slurm chooses), what this machine lacks for the jobs it runs
itself (the preflight: weights, packages, devices), what the config gets wrong wherever they run, and the room to
write their outputs. `fourloops plan` asks the same checks of the same jobs.

Where each job runs and what it asks come from the run's placement (fourloops.placement.Placement), a job's params
from `params`, what each output took last time from the provenance records; Snakemake's DAG is the one the run
built (its pending jobs: `needrun_jobs()`).
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import os

from fourloops import machines, walls
from fourloops.stage import stage_for


def has_work(job) -> bool:
    """A pending job with work of its own: files to make, or a rule that runs (the publication gate: a script and
    no files); target rules (all, probe) have neither."""
    return bool(job.rule.output) or not job.rule.norun


def job_key(job) -> str:
    """How the wall check keys a job (walls.PendingJob.output): its first output, or its rule's name (no files)."""
    return str(job.output[0]) if job.rule.output else job.rule.name


class Admission:
    """Whether a run's pending jobs may start: `placement` places and asks them, `params(rule, wildcards)` gives a
    job's params, `records` (fourloops.records.index) what each output took last time, `global_resources()` this
    invocation's --resources."""

    def __init__(self, placement, params, records, global_resources):
        self.placement = placement
        self.machines = placement.machines
        self.config = placement.config
        self.params = params
        self.records = records
        self.global_resources = global_resources

    def pending(self, dag) -> list[walls.PendingJob]:
        """The jobs the run would execute, as the wall check and `fourloops plan` judge them: every pending job with
        work of its own (has_work), the publication gate's too (a script and no files: keyed by its rule's name)."""
        return [self.pending_job(job.rule.name, dict(job.wildcards.items()), job_key(job))
                for job in dag.needrun_jobs() if has_work(job)]

    def pending_job(self, rulename: str, wildcards: dict, key: str) -> walls.PendingJob:
        """One job as the wall check judges it, keyed by `key` (its first output, or its rule's name): its profile,
        its ask and ask context on the machine it is placed on (context_for: rented or started by this Snakemake),
        its params, and whether the workflow declares its rule local."""
        return walls.PendingJob(
            rule=rulename, output=key, profile=self.placement.profile(rulename, wildcards), ask=self.placement.ask(rulename, wildcards),
            wildcards=wildcards, params=self.params(rulename, wildcards), context=self.placement.context_for(rulename, wildcards),
            local=rulename in self.placement.local_rules(),
        )

    def provided_vram_mb(self) -> int | None:
        provided = machines.resource_value(self.global_resources(), "vram_mb")
        return int(provided) if isinstance(provided, (int, float)) and provided < 2**40 else None

    def check_walls(self, dag, machine_name: str | None = None, own_resources: bool = True) -> walls.Verdict:
        """Every pending job against the machine it will run on (check)."""
        return self.check(self.pending(dag), machine_name, own_resources)

    def check(self, jobs: list[walls.PendingJob], machine_name: str | None = None,
              own_resources: bool = True) -> walls.Verdict:
        """`jobs` (pending_job's) each against the machine it will run on (config machine, or the pod under its
        executor; on a SLURM cluster, the partition fourloops.slurm chooses: the verdict then carries `placed`);
        the verdict's `on` holds the machine each job was judged on."""
        target = self.placement.here(machine_name)  # under the RunPod executor never a cluster: nothing goes to one
        cluster = target if target in machines.clusters(self.machines) else (
            None if machine_name else self.placement.slurm_cluster())
        if cluster is not None:
            from fourloops import slurm

            return slurm.place(jobs, self.machines, cluster).verdict
        # this invocation's --resources vram_mb caps jobs run from here; asked about another machine, its own
        # profile would declare that machine's card
        provided = self.provided_vram_mb() if own_resources and target == self.placement.here(self.config["machine"]) else None
        return walls.check_jobs(jobs, self.machines, target, provided, self.placement.moved())

    def local_jobs(self, dag, placed=None):
        """Pending jobs with work of their own (has_work, as `pending`: the publication gate's too) that run on this
        machine (pod jobs meet their needs on the pod, partition jobs on the node). `placed`: the run's SLURM
        placement where the caller has it (before_first_job), so the walls are not checked again."""
        remote = machines.remote_tags(self.placement.executor(), self.machines)
        jobs = [j for j in dag.needrun_jobs()
                if has_work(j) and self.placement.profile(j.rule.name, dict(j.wildcards.items())) not in remote]
        if self.placement.executor() == "slurm":  # partition jobs meet their needs on the node
            placed = placed or self.check_walls(dag).placed
            jobs = [j for j in jobs if placed.where.get(job_key(j), "").startswith("here")]
        return jobs

    def _pending_needs(self, dag, keep) -> list[str]:
        """preflight.problems over the stage needs `keep(job, need)` takes of the pending jobs; a model file or
        directory the run's own jobs write (the sizing set's models) is made by the run, not missing."""
        from fourloops import preflight

        needs = [n for j in dag.needrun_jobs() if has_work(j)
                 for n in stage_for(j.rule.name).needs_for(dict(j.params.items())) if keep(j, n)]
        return preflight.problems(needs, [str(f) for j in dag.jobs if j.rule.output for f in j.output])

    def config_problems(self, dag) -> list[str]:
        """What the config gets wrong for the pending jobs wherever they run (a pod's or a node's machine needs are
        met there): a hub revision that is no commit, a revision given for a local directory, and a pod job's weights
        in a directory of this machine (`fourloops plan` names them; a real run refuses them before any job)."""
        from fourloops.preflight import CONFIG_KINDS

        return (self._pending_needs(dag, lambda job, need: need.kind in CONFIG_KINDS)
                + self.pod_directory_problems(dag))

    def preflight_problems(self, dag, placed=None) -> list[str]:
        """What this machine lacks for its own pending jobs (a remote job's machine needs are met, or not, on its
        machine), and config_problems."""
        from fourloops.preflight import CONFIG_KINDS

        here = {id(j) for j in self.local_jobs(dag, placed)}
        return (self._pending_needs(dag, lambda job, need: id(job) in here or need.kind in CONFIG_KINDS)
                + self.pod_directory_problems(dag))

    def pod_directory_problems(self, dag) -> list[str]:
        """A pod job (under the RunPod executor, or the one `fourloops plan` plans for) that would load weights
        from a directory of this machine (its `local_weights` param): the pod's fresh container has none of this
        machine's files and the executor uploads job inputs only, so the job would fail there after
        the pod is paid for. A run on the pod itself (its config machine `pod`, no executor) reads its own
        directories, and a SLURM node the shared filesystem: neither is refused."""
        if self.placement.executor() != "runpod":
            return []
        from fourloops.model_sets import LOCAL_WEIGHT_KEYS

        on_pod = machines.remote_tags("runpod", self.machines)
        found: dict[tuple[str, str], str] = {}
        for job in dag.needrun_jobs():
            wc = dict(job.wildcards.items())
            if not job.rule.output or self.placement.profile(job.rule.name, wc) not in on_pod:
                continue
            for name, w in (self.params(job.rule.name, wc).get("local_weights") or {}).items():
                where = (LOCAL_WEIGHT_KEYS[name], w["path"])  # named by the first rule by name (needrun order is a
                found[where] = min(found.get(where, job.rule.name), job.rule.name)  # set's)
        return [f"config {key} = {path!r} is a directory on this machine (rule {rule}, which runs on a RunPod pod): "
                "the pod's container has none of this machine's files and nothing uploads weights; name the hub id "
                "pinned at a commit (the pod downloads it), or run without `--executor runpod`"
                for (key, path), rule in sorted(found.items())]

    def space_problems(self, dag, placed=None) -> list[str]:
        """Each folder the pending local jobs write (outputs, logs, benchmarks) can be written and has room for
        what their records say they wrote last time (fourloops.space); checked before Snakemake deletes anything."""
        from fourloops import space

        wrote = {os.path.normpath(e["path"]): int(e.get("bytes") or 0)
                 for r in self.records.records for e in r.entries("outputs")}
        outputs = {}
        for job in self.local_jobs(dag, placed):
            for f in [*job.output, *job.log, *([job.benchmark] if job.benchmark else [])]:
                path = os.path.normpath(str(f))
                outputs[path] = wrote.get(path, 0)
        return space.problems(outputs)

    def refused(self, dag) -> tuple[str | None, object]:
        """onstart's checks, in order, on Snakemake's DAG: the walls (what cannot fit: seconds, no torch), then, for a
        real run, what is missing on this machine, then the room to write; the first that refuses says why (None: the
        run may start), with the run's SLURM placement where it has one (its local rules run on this machine)."""
        verdict = self.check_walls(dag)
        placed = getattr(verdict, "placed", None)
        if not verdict.ok:
            from fourloops import refusal

            return (refusal.cluster_report(placed, self.machines) if placed
                    else refusal.report(verdict, self.machines)), placed
        if self.config["model_set"] != "smoke":
            from fourloops import preflight

            missing = self.preflight_problems(dag, placed)
            if missing:
                return preflight.report(missing, self.config["model_set"]), placed
        if full := self.space_problems(dag, placed):
            return "\n".join(full), placed
        return None, placed
