"""Where each job runs and what it asks there: the executor the run uses, the machine the jobs this Snakemake starts
run on, a pod the RunPod executor rents, a SLURM cluster's partition; each job's profile tag, its ask (VRAM, RAM,
seconds, batch) on the machine it is placed on, and the `resources:` every rule declares from them.

Snakemake's workflow object is read for the executor it runs under, the rules it declares local, and the rules'
resources; a job's params come from the `params` function it is given (fourloops.jobgraph.JobGraph.params).
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import dataclasses
import os

from fourloops import asks, card, machines, walls
from fourloops.stage import AskContext, stage_for

SLURM_RESOURCES = ("slurm_partition", "gpu", "gpu_model", "gres", "constraint")  # snakemake-executor-plugin-slurm's


class Placement:
    """The machines of `table` (config/machines.yaml, loaded) each job of `workflow` runs on, under the run's `config`;
    `facts` (models.yaml) and `measured` (the probes' records) make the asks, `params(rule, wildcards)` gives a job's
    params."""

    def __init__(self, workflow, config: dict, table: dict, facts: dict, measured: asks.Measurements, params):
        self.wf = workflow
        self.config = config
        self.machines = table
        self.facts = facts
        self.measured = measured
        self.params = params
        self._asks: dict = {}
        self._ask_contexts: dict[tuple[str, bool], AskContext] = {}
        self._placements: dict = {}
        self._slurm: dict = {}
        self.target: str | None = None  # `fourloops plan --machine`: the machine asked about, not config machine
        # `fourloops plan`: the executor the run would use (a profile's `executor:`), where the dry-run has its own
        self.planned_executor: str | None = None

    def executor(self) -> str | None:
        """The executor the jobs run under: a dry-run's own is Snakemake's `dryrun`; `fourloops plan` sets the one
        the run would use (planned_executor), so that the plan places jobs as that run would."""
        return self.planned_executor or getattr(self.wf.executor_plugin, "name", None)

    def local_rules(self) -> set[str]:
        """The rules the workflow declares local (`localrule: True`: the publication gate). Snakemake's own is_local
        holds every rule under a local executor, a dry-run's included, so the plan of a SLURM run could not ask it."""
        return set(getattr(self.wf, "_localrules", ()))

    def profile(self, rulename: str, wildcards: dict) -> str:
        """The job's profile tag: its stage's, or the one the config chooses (Stage.profile_of)."""
        return stage_for(rulename).profile_for(self.config)

    def moved(self) -> dict[str, str]:
        """Profile tag -> the machine the executor moves its jobs to (fourloops.machines.placement), once per
        executor."""
        executor = self.executor()
        if executor not in self._placements:
            self._placements[executor] = machines.placement(executor, self.machines)
        return self._placements[executor]

    def placed_on(self, rulename: str, wildcards: dict) -> str:
        """The machine whose asks a job takes: the one the executor moves it to (a pod job under the RunPod
        executor: the pod's probes, allocator and card), else the target."""
        moved = self.moved()
        target = self.here()
        return moved.get(self.profile(rulename, wildcards), target) if moved else target

    def here(self, name: str | None = None) -> str:
        """The machine the jobs the executor does not move run on: `name`, the target, or config machine. The RunPod
        executor submits nothing to SLURM: its local rules run on this machine, which a cluster there means as the
        SLURM executor's local rules do (fourloops.slurm.place: the cluster's submit_host)."""
        name = name or self.target or self.config["machine"]
        if self.executor() == "runpod" and name in machines.clusters(self.machines):
            return machines.cluster(self.machines, name).submit_host
        return name

    def point_jobs_here(self, environ=os.environ) -> None:
        """The jobs this Snakemake starts run where the walls judged them (here()): where that is not config machine
        (a RunPod run whose config machine is a cluster runs its local rules on this machine), their busy-card
        limit and torch allocator are this machine's (card.MACHINE_ENV; a user's own allocator setting stands), not
        the cluster's that rules/common.smk set before the executor was known."""
        here = self.here()
        if here != self.config["machine"]:
            environ[card.MACHINE_ENV] = here
            card.set_allocator_env(here, self.machines, environ)

    def rented(self, rulename: str, wildcards: dict) -> bool:
        """The executor moves the job to a machine it rents (a pod job under the RunPod executor), not to a machine
        this Snakemake starts jobs on: a run on the pod itself (config machine pod) has both on a machine of one
        name."""
        return self.executor() == "runpod" and self.profile(rulename, wildcards) in self.moved()

    def set_target(self, machine_name: str) -> None:
        """Judge the asks for `machine_name` (its own probes first), whatever the run's config machine says."""
        if machine_name != self.target:
            self.target = machine_name
            self._ask_contexts.clear()
            self._asks.clear()
            self._slurm.clear()

    def context_for(self, rulename: str, wildcards: dict) -> AskContext:
        """The ask context of one job: the machine it is placed on, rented or started by this Snakemake."""
        return self.ask_context(self.placed_on(rulename, wildcards), self.rented(rulename, wildcards))

    def ask(self, rulename: str, wildcards: dict) -> asks.Ask:
        ctx = self.context_for(rulename, wildcards)
        key = (ctx.machine, ctx.rented, rulename, tuple(sorted(wildcards.items())))
        if key not in self._asks:
            self._asks[key] = stage_for(rulename).ask_for(ctx, wildcards, self.params(rulename, wildcards))
        return self._asks[key]

    def ask_context(self, name: str | None = None, rented: bool = False) -> AskContext:
        """What the asks on machine `name` (default: the target) consult: the model facts as its torch allocator
        makes them (machines.yaml `cuda_allocator`; for jobs this Snakemake starts itself, here, through SLURM,
        which passes the environment on, or on the pod it runs on, torch's variable as the environment holds it: a
        user's own setting stands over the machine's, rules/common.smk; a `rented` pod's jobs take the pod's, which
        the RunPod executor sets), its measurements, its name; made once per machine and kind."""
        name = self.here(name)
        if (name, rented) not in self._ask_contexts:
            allocator = machines.allocator(self.machines, name)
            if not rented:
                allocator = card.own_allocator() or allocator
            facts = asks.for_allocator(self.facts, allocator)
            # a measurement made under another allocator is a floor for the job's estimate (asks.Measurements)
            provided = machines.resource_value(getattr(self.wf, "global_resources", None), "vram_mb")
            self._ask_contexts[(name, rented)] = AskContext(
                facts, dataclasses.replace(self.measured, allocator=allocator), name, rented,
                int(provided) if isinstance(provided, (int, float)) else None)
        return self._ask_contexts[(name, rented)]

    def resources(self) -> dict:
        """The `resources:` every rule declares (`resources: **ASKS`): the scheduler's numbers and the profile tag."""

        def profile(wildcards, rulename):
            return self.profile(rulename, dict(wildcards.items()))

        def mem_mb(wildcards, rulename):
            return self.ask(rulename, dict(wildcards.items())).mem_mb

        def vram_mb(wildcards, rulename):
            return self.ask(rulename, dict(wildcards.items())).vram_mb

        def batch(wildcards, rulename):  # items a call, as the ask chose them for the job's machine (fourloops.batching)
            return self.ask(rulename, dict(wildcards.items())).batch

        def slurm_request(name):  # under the slurm executor: the partition and card fourloops.slurm chose
            def value(wildcards, rulename):
                request = self.slurm_request(rulename, dict(wildcards.items()))
                return None if request is None else request.get(name)  # None: Snakemake leaves it out

            return value

        out = {"profile": profile, "mem_mb": mem_mb, "vram_mb": vram_mb, "batch": batch}
        out.update({k: slurm_request(k) for k in SLURM_RESOURCES})
        return out

    def drop_slurm_resources(self) -> None:
        """Under any executor but slurm the plugin's resources are None for every job: take them off the
        rules before the DAG, so Snakemake does not evaluate five resources per job for nothing. (The executor
        is known only once the DAG is about to be built, after the rules are declared.)"""
        from snakemake.resources import Resources

        if self.executor() == "slurm":
            return
        for rule in self.wf.rules:
            if any(name in rule.resources for name in SLURM_RESOURCES):
                kept = Resources()
                for name, value in rule.resources.items():
                    if name not in SLURM_RESOURCES:
                        kept[name] = value
                rule.resources = kept

    def slurm_cluster(self) -> str | None:
        """The cluster a run under the slurm executor targets: config machine when it names one, else the
        machines file's only cluster (None under other executors)."""
        from fourloops import slurm

        if self.executor() != slurm.EXECUTOR and self.config["machine"] not in machines.clusters(self.machines):
            return None
        if self.executor() == "runpod":  # it rents pods and runs the rest here: no job goes to the cluster
            return None
        if self.config["machine"] in machines.clusters(self.machines):
            return self.config["machine"]
        found = machines.clusters(self.machines)
        if not found:
            raise machines.MachinesError(
                f"machine = {self.config['machine']!r} under --executor slurm: config/machines.yaml has no SLURM "
                "cluster (a machine with a `slurm:` section, as the file's `cluster`); allowed: add one "
                "(docs/running.md, \"On SLURM\"), or run without --executor slurm")
        if len(found) != 1:
            raise machines.MachinesError(
                f"machine = {self.config['machine']!r} under --executor slurm: config/machines.yaml has "
                f"{len(found)} SLURM clusters {found}; allowed: --config machine=<one of them>")
        return found[0]

    def slurm_request(self, rulename: str, wildcards: dict) -> dict | None:
        """The plugin's resources for one job (None: not under the slurm executor, or it runs here); each
        job's five resources ask this, so it is placed once."""
        if self.executor() != "slurm":  # fourloops.slurm.EXECUTOR, without importing it for every job
            return None
        from fourloops import slurm

        key = (rulename, tuple(sorted(wildcards.items())))
        if key not in self._slurm:
            c = machines.cluster(self.machines, self.slurm_cluster())
            job = walls.PendingJob(rulename, "", self.profile(rulename, wildcards), self.ask(rulename, wildcards),
                                   wildcards, local=rulename in self.local_rules())
            p = None if slurm.runs_here(job, c) else slurm.partition_for(job, c)
            self._slurm[key] = None if p is None else slurm.request(job.ask, p, c)
        return self._slurm[key]
