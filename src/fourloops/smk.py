"""Snakemake glue: the workflow's rules seen through the stage declarations, as rules/*.smk and their hooks use them.

The one library module (beside `jobs`, `plan` and the executor plugin) that hooks into Snakemake's run.
`rules/common.smk` makes one `Workflow` per run; the rules' `resources:` (the asks) and `lineage` param, the output
check on the DAG, the onstart checks and the last-good stash all go through it. Each concern is a module of its own,
given what it reads: the jobs and their lineage (fourloops.jobgraph), what a run is asked for (fourloops.targets),
where each job runs and what it asks (fourloops.placement), the checks before the first job (fourloops.admission),
the last good outputs (fourloops.lastgood) and the checkpoints a job resumes from (fourloops.checkpoints).
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import os
import sys
from pathlib import Path

from fourloops import asks, checkpoints, machines, records, targets
from fourloops.admission import Admission
from fourloops.jobgraph import JobGraph
from fourloops.lastgood import LastGood
from fourloops.placement import Placement
from fourloops.stage import measured_key, stage_for

_BY_WORKFLOW: dict[int, "Workflow"] = {}
MODEL_SET_MARKER = Path(".fourloops-model-set")


class Workflow:
    """fourloops' view of one Snakemake workflow object: its facts (models.yaml), machines, provenance records and
    measurements, and one part per concern: `jobs` (JobGraph: params, files, producers, lineage), `placement`
    (Placement: where each job runs, its asks, the rules' resources), `admission` (Admission: the walls, preflight,
    config and space checks before the first job) and `last_good` (LastGood: the stash of the stages that keep their
    last good outputs)."""

    def __init__(self, workflow, config: dict):
        self.wf = workflow
        self.config = config
        base = Path(workflow.basedir)
        self.facts = asks.load_facts(base / "config" / "models.yaml")
        self.machines = machines.load(base / "config" / "machines.yaml")
        # a stash of last good outputs left by a Snakemake that was killed is settled first, so that the records
        # read next hold the ones it puts back (read before it, the output check called the restored outputs
        # unverified, "its record is missing", and the first dry-run after a kill listed their jobs)
        self.last_good = LastGood(workflow)
        if self.main_process():
            self.last_good.recover()
        # the provenance records, read once: measured peaks (asks) and the output check (verify) use them
        self.records = records.index(Path.cwd())
        self.measured = asks.Measurements.load(Path.cwd(), measured_key, index=self.records)
        self.jobs = JobGraph(workflow)
        self.placement = Placement(workflow, config, self.machines, self.facts, self.measured, self.jobs.params)
        self.jobs.identity = self._batch_identity
        self.admission = Admission(self.placement, self.jobs.params, self.records, lambda: workflow.global_resources)

    def _batch_identity(self, rulename: str, wildcards: dict) -> dict | None:
        """A job whose bytes change with its batch (its stage's `batch_changes_bytes`) has the batch it runs at on
        its machine in its lineage: placed where another batch fits, it runs again."""
        if not stage_for(rulename).batch_changes_bytes:
            return None
        return {"batch": self.placement.ask(rulename, wildcards).batch}

    # ------------------------------------------------------------------------------ what the rule files use
    def machine_names(self) -> list[str]:
        """The single machines of machines.yaml (a probe measures one of them)."""
        return machines.names(self.machines)

    def resources(self) -> dict:
        """The `resources:` every rule declares (`resources: **ASKS`): fourloops.placement.Placement.resources."""
        return self.placement.resources()

    def lineage_param(self):
        """The `lineage` params function every rule with outputs declares (`lineage=LINEAGE`)."""
        return self.jobs.lineage_param()

    def unmade_artifacts(self, publish: dict) -> list[str]:
        """publish.artifacts that no rule of this workflow makes (fourloops.targets.unmade_artifacts)."""
        return targets.unmade_artifacts(self.jobs.producers, publish)

    # ------------------------------------------------------------------------------ the output check on the DAG
    def main_process(self) -> bool:
        """The Snakemake the user started, not a job's own (remote or subprocess) Snakemake."""
        mode = getattr(self.wf, "exec_mode", None)
        return mode is None or mode.name == "DEFAULT"

    def dag_jobs(self, dag) -> tuple[set[str], list]:
        """What the output check needs from Snakemake's own DAG: every file its jobs read or write (and the
        targets), and the jobs that write a provenance record (fourloops.verify.Expected), so the output check
        holds each output to its record. What a walk of the rules (`requested_paths`, for the report's plan) would
        find, read from the jobs Snakemake has made, without expanding every job a second time."""
        from fourloops.verify import Expected

        paths = {os.path.normpath(str(f)) for f in dag.targetfiles}
        found = []
        for job in dag.jobs:
            outputs = [os.path.normpath(str(f)) for f in job.output]
            paths.update(outputs)
            paths.update(os.path.normpath(str(f)) for f in job.input)
            made = [f for f in outputs if f.startswith(records.ROOT + os.sep)]
            if job.rule.output and len(made) == 1:
                wc = dict(job.wildcards.items())
                found.append(((job.rule.name, tuple(sorted(wc.items()))),
                              Expected(made[0], tuple(f for f in outputs if f != made[0]), job.rule.name, wc)))
        return paths, [e for _, e in sorted(found, key=lambda x: x[0])]

    def force_mismatched(self, dag) -> list:
        """The output check on Snakemake's DAG, once its jobs are known and before it decides which must run:
        every existing output its jobs use is compared with the sha256 its provenance record holds
        (fourloops.verify); the job of each problem is forced (its record, an output of that job, joins the
        DAG's forced files), so it runs again with everything downstream, and the run says why."""
        from fourloops import verify

        paths, expected = self.dag_jobs(dag)
        problems = verify.check(Path.cwd(), paths, index=self.records, expected=expected)
        if problems:
            print("fourloops: outputs that no longer match their provenance record; running these "
                  "jobs again:\n" + verify.describe(problems), file=sys.stderr, flush=True)
            dag.forcefiles.update(p.record for p in problems)
        return problems

    def check_outputs_on_the_dag(self) -> None:
        """Before Snakemake decides which jobs must run: unknown targets are refused with the reason, and the
        DAG's existing outputs are checked against their provenance records (`force_mismatched`): a missing,
        truncated or edited one, an output whose record is gone (unverified), or a job whose recorded inputs are
        gone, is forced to run again with everything downstream, and the run says why."""
        wf = self.wf
        if not self.main_process():
            return  # a job's own Snakemake (remote or subprocess): the main run has checked
        prepare = wf._prepare_dag

        def prepare_checked(*args, **kwargs):
            if wf.executor_plugin is not None:  # no cores or jobs to run on: Snakemake would wait forever
                from fourloops.config import scheduling_problems

                if scheduling := scheduling_problems(wf.resource_settings,
                                                     wf.executor_plugin.common_settings.local_exec):
                    from snakemake.exceptions import WorkflowError

                    raise WorkflowError("invalid settings (nothing was run or written):\n  " + "\n  ".join(scheduling))
            try:  # the cluster a SLURM run targets, named before any job's resources ask it
                self.placement.slurm_cluster()
            except machines.MachinesError as err:
                from snakemake.exceptions import WorkflowError

                raise WorkflowError(f"invalid machines (nothing was run or written):\n  {err}") from None
            self.take_the_directory(kwargs)
            self.placement.drop_slurm_resources()
            settings = wf.dag_settings
            if settings is None:
                return prepare(*args, **kwargs)
            requested = list(settings.targets) or ([wf.default_target] if wf.default_target else [])
            unknown = [why for t in requested if (why := targets.unknown_target(wf, self.jobs.producers, t))]
            unknown += targets.unknown_rule_options(wf, self.jobs.producers, settings)
            if unknown:
                from snakemake.exceptions import WorkflowError

                raise WorkflowError("\n".join(unknown) + "\nnothing was run or written.")
            result = prepare(*args, **kwargs)
            dag = wf.dag
            update_needrun = dag.update_needrun
            checked = []

            async def update_needrun_checked(*a, **kw):
                # DAG.init's first call, with every job of the requested DAG made; a checkpoint's later calls
                # (none in this workflow) find them checked
                if not checked:
                    checked.append(self.force_mismatched(dag))
                return await update_needrun(*a, **kw)

            dag.update_needrun = update_needrun_checked
            return result

        wf._prepare_dag = prepare_checked

    def take_the_directory(self, prepare_kwargs: dict) -> None:
        """A run that will execute jobs (not a dry-run, not --nolock) holds the working directory for its life
        (fourloops.runlock), refused at once when a live run holds it; holding it, it removes the staging folders
        and temporaries that killed jobs left under results/."""
        wf = self.wf
        if wf.executor_plugin is None or wf.dryrun or prepare_kwargs.get("lock_warn_only") or prepare_kwargs.get("nolock"):
            return
        from snakemake.exceptions import WorkflowError

        from fourloops import runlock

        try:
            runlock.hold(Path.cwd(), os.environ.get("FOURLOOPS_INVOCATION", ""))
        except runlock.RunLockError as err:
            raise WorkflowError(str(err)) from None
        for under in ("results", "models/smoke", "models/sizing"):  # the folders jobs write (the model builds')
            for path in runlock.clear_leftovers(Path.cwd(), under):
                print(f"fourloops: removed {path}, left by a killed job", file=sys.stderr)

    # ------------------------------------------------------------------------------------------ the hooks
    def before_first_job(self, dag) -> None:
        """onstart: refuse what cannot fit (seconds, no torch), then, for a real run, what is missing here, then what
        has no room (fourloops.admission); mark the working directory with its model set only once the run is allowed
        to start, then stash the last good outputs and retire other lineages' checkpoints."""
        from snakemake.exceptions import WorkflowError

        refused, placed = self.admission.refused(dag)
        if refused:
            raise WorkflowError(refused)
        if placed is not None and self.placement.executor() == "slurm":
            self.wf.localrules(*placed.local_rules)  # desk-device jobs run on this machine
        self.placement.point_jobs_here()
        MODEL_SET_MARKER.write_text(self.config["model_set"] + "\n")
        self.last_good.stash([j for j in dag.needrun_jobs() if j.rule.output and stage_for(j.rule.name).keep_last_good])
        checkpoints.retire(dag, self.placement.profile, set(self.placement.moved()))  # a pod's stay on the pod

    def settle_last_good(self) -> None:
        """onsuccess, onerror: a job that failed gets its previous outputs back; the stash is dropped."""
        self.last_good.settle()


def invocation(argv: list[str], db_url: str | None) -> str:
    """The command line the jobs record for provenance (rules/common.smk redacts the secrets in it), with the password
    of a --persistence-backend-db-url shown as *** (SQLAlchemy's rendering; a URL it cannot read is left out)."""
    line = " ".join(argv)
    if db_url and db_url in line:
        from sqlalchemy.exc import ArgumentError

        from fourloops.verify import shown_db_url

        try:
            shown = shown_db_url(db_url)
        except ArgumentError:
            shown = "<persistence-backend-db-url>"
        line = line.replace(db_url, shown)
    return line


def check_model_set(model_set: str, workdir: Path | None = None) -> None:
    """A working directory holds one model set: smoke outputs never mix with real ones. (A `--config` on
    the command line replaces a profile's `config:` list, so `--workflow-profile profiles/smoke --config x=1`
    silently asks for the real set; this catches it.)"""
    from snakemake.exceptions import WorkflowError

    marker = (workdir or Path.cwd()) / MODEL_SET_MARKER
    held = marker.read_text().strip() if marker.exists() else None
    if held is not None and held != model_set:
        raise WorkflowError(
            f"model_set = {model_set!r}, but this working directory ({marker.parent}) holds {held!r} outputs; "
            f"allowed: {held!r} here. A --config on the command line replaces the profile's config list: add "
            "model_set=smoke to it for the smoke set, or run the real set in its own directory."
        )




def workflow_of(workflow, config: dict | None = None) -> Workflow:
    """The fourloops view of `workflow` (made once, by rules/common.smk, with the run's config)."""
    key = id(workflow)
    if key not in _BY_WORKFLOW:
        if config is None:
            raise LookupError("rules/common.smk has not made the fourloops view of this workflow yet")
        _BY_WORKFLOW[key] = Workflow(workflow, config)
    return _BY_WORKFLOW[key]
