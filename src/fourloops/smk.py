"""Snakemake glue: the workflow's rules seen through the stage declarations.

The one library module (beside `jobs`, `plan` and the executor plugin) that knows Snakemake's objects.
`rules/common.smk` makes one `Workflow` per run; the rules' `resources:` (the asks), their `lineage`
param, the onstart wall check and preflight, and `fourloops plan` all go through it.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path

from fourloops import asks, card, lineage, machines, records, walls
from fourloops.stage import AskContext, Stage, measured_key, stage_for

_BY_WORKFLOW: dict[int, "Workflow"] = {}
MODEL_SET_MARKER = Path(".fourloops-model-set")
CHECKPOINT_LINEAGE = ".snakemake/fourloops-checkpoints.json"  # checkpoint folder -> the lineage of the job writing it
LINEAGE_PARAM = "lineage"
SLURM_RESOURCES = ("slurm_partition", "gpu", "gpu_model", "gres", "constraint")  # snakemake-executor-plugin-slurm's


def _calling_rule() -> str:
    """The name of the Snakemake rule whose params function is being called (from the call stack)."""
    from snakemake.rules import Rule

    frame = sys._getframe(2)
    for _ in range(16):
        if frame is None:
            break
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Rule):
            return candidate.name
        frame = frame.f_back
    raise RuntimeError("the lineage param was evaluated outside a Snakemake rule's params")


def _digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def as_file_target(name: str) -> str:
    """A file target (or --forcerun, --until, --omit-from name) as Snakemake takes it (workflow.execute's `files`): a
    relative one relative to the working directory, normalized (./results/x.csv, results//x.csv and ../<here>/results/
    x.csv are results/x.csv), an absolute one as it is."""
    return os.path.normpath(name) if os.path.isabs(name) else os.path.relpath(name)


def has_work(job) -> bool:
    """A pending job with work of its own: files to make, or a rule that runs (the publication gate: a script and
    no files); target rules (all, probe) have neither."""
    return bool(job.rule.output) or not job.rule.norun


def job_key(job) -> str:
    """How the wall check keys a job (walls.PendingJob.output): its first output, or its rule's name (no files)."""
    return str(job.output[0]) if job.rule.output else job.rule.name


class Workflow:
    """fourloops' view of one Snakemake workflow object: facts, machines, measurements, asks, lineage."""

    def __init__(self, workflow, config: dict):
        self.wf = workflow
        self.config = config
        base = Path(workflow.basedir)
        self.facts = asks.load_facts(base / "config" / "models.yaml")
        self.machines = machines.load(base / "config" / "machines.yaml")
        # a stash of last good outputs left by a Snakemake that was killed is settled first, so that the records
        # read next hold the ones it puts back (read before it, the output check called the restored outputs
        # unverified, "its record is missing", and the first dry-run after a kill listed their jobs)
        self.recover_last_good()
        # the provenance records, read once: measured peaks (asks) and the output check (verify) use them
        self.records = records.index(Path.cwd())
        self.measured = asks.Measurements.load(Path.cwd(), measured_key, index=self.records)
        self._asks: dict = {}
        self._ask_contexts: dict[tuple[str, bool], AskContext] = {}
        self._placements: dict = {}
        self._params: dict = {}
        self._lineage: dict = {}
        self._producers: dict = {}
        self._walks: dict = {}
        self._inputs: dict = {}
        self._outputs: dict = {}
        self._products = None  # the rules' output patterns by constant prefix, built on first use
        self._slurm: dict = {}
        self.target: str | None = None  # `fourloops plan --machine`: the machine asked about, not config machine
        # `fourloops plan`: the executor the run would use (a profile's `executor:`), where the dry-run has its own
        self.planned_executor: str | None = None

    def machine_names(self) -> list[str]:
        """The single machines of machines.yaml (a probe measures one of them)."""
        return machines.names(self.machines)

    # ---------------------------------------------------------------------------- rules and params
    def stage(self, rulename: str) -> Stage:
        return stage_for(rulename)

    def profile(self, rulename: str, wildcards: dict) -> str:
        """The job's profile tag: its stage's, or the one the config chooses (Stage.profile_of)."""
        return self.stage(rulename).profile_for(self.config)

    def params(self, rulename: str, wildcards: dict) -> dict:
        """The rule's params for these wildcards, lineage left out (it is derived from the rest)."""
        key = (rulename, tuple(sorted(wildcards.items())))
        if key not in self._params:
            rule = self.wf.get_rule(rulename)
            out = {}
            for name, value in rule.params.items():
                if name == LINEAGE_PARAM:
                    continue
                if callable(value):
                    value, _ = rule.apply_input_function(
                        value, wildcards, input=lambda: list(self.inputs(rulename, wildcards)),
                        output=lambda: list(self.outputs(rulename, wildcards)),
                    )
                out[name] = value
            self._params[key] = out
        return self._params[key]

    def inputs(self, rulename: str, wildcards: dict) -> list[str]:
        """A job's input files, expanded once (the output check's walk and lineage both ask)."""
        key = (rulename, tuple(sorted(wildcards.items())))
        if key not in self._inputs:
            # the job Snakemake has made for them already holds the same expansion (Job.__init__ expands them)
            job = getattr(getattr(getattr(self.wf, "dag", None), "job_factory", None), "cache", {}).get(
                (rulename, *key[1]))
            files = job.input if job is not None else self.wf.get_rule(rulename).expand_input(wildcards)[0]
            self._inputs[key] = [str(f) for f in files]
        return self._inputs[key]

    def outputs(self, rulename: str, wildcards: dict) -> list:
        """A job's output files (Snakemake's own objects), expanded once."""
        key = (rulename, tuple(sorted(wildcards.items())))
        if key not in self._outputs:
            self._outputs[key] = list(self.wf.get_rule(rulename).expand_output(wildcards)[0])
        return self._outputs[key]

    def producers(self, path: str) -> list[tuple[str, dict]]:
        """(rule, wildcards) of the jobs that would make `path` (none for a source file)."""
        if path not in self._producers:
            if self._products is None:
                from snakemake.common.prefix_lookup import PrefixLookup

                # every product (output, log, benchmark) of every rule with outputs, by its constant prefix and
                # then its constant suffix, as Snakemake's OutputIndex keeps them, but per pattern: a path is
                # matched only against the patterns whose constant prefix and suffix it has, the only ones that
                # can match it; one entry per prefix, so the lookup yields a few groups, not every pattern
                groups: dict[str, dict[str, list]] = {}
                for rule in self.wf.rules:
                    if rule.output:
                        for i, o in enumerate(rule.products()):
                            groups.setdefault(str(o.constant_prefix()), {}).setdefault(
                                str(o.constant_suffix()), []).append((rule, i, o))
                self._products = PrefixLookup([(prefix, (sorted({len(s) for s in by_suffix}), by_suffix))
                                               for prefix, by_suffix in groups.items()])
            matched: dict = {}  # rule -> [(index of the pattern in rule.products(), its wildcards)]
            for _, (lengths, by_suffix) in self._products.match_iter(path):
                for n in lengths:
                    if n > len(path):
                        break
                    for rule, i, o in by_suffix.get(path[len(path) - n:], ()):
                        if m := o.match(path):
                            matched.setdefault(rule, []).append((i, m.groupdict()))
            found = []
            for rule, matches in matched.items():
                # Rule.get_wildcards on those patterns: the first match with the shortest wildcard values
                _, wildcards = min(sorted(matches, key=lambda m: m[0]), key=lambda m: rule.get_wildcard_len(m[1]))
                rule.check_wildcards(wildcards)
                found.append((rule.name, dict(wildcards)))
            self._producers[path] = sorted(found, key=lambda x: x[0])
        return self._producers[path]

    # ------------------------------------------------------------------------------------- lineage
    def code(self, rulename: str) -> str:
        """Digest of the library code a rule's jobs run: its stage's code module's import closure and its script
        (never its declaration: fourloops.declarations)."""
        rule = self.wf.get_rule(rulename)
        extra = []
        if rule.script:
            extra.append(os.path.normpath(os.path.join(os.path.dirname(rule.snakefile), rule.script)))
        stage = self.stage(rulename)
        if stage.code is None:
            raise ValueError(f"rule {rulename} writes outputs, but its stage {stage.name} ({stage.module}) names no "
                             "code module (Stage(code=...)): its jobs would have no lineage")
        return lineage.code_digest(stage.code, *extra)

    def lineage(self, rulename: str, wildcards: dict) -> str:
        """Everything upstream of a job, and the job's own code: its params, its code, and the lineage of
        the job that made each input (Snakemake does not rerun an up-to-date job for a missing
        intermediate, so a changed prompt must reach every downstream job through its params)."""
        key = (rulename, tuple(sorted(wildcards.items())))
        if key not in self._lineage:
            upstream = []
            for path in self.inputs(rulename, wildcards):
                made_by = self.producers(path)
                upstream.append([self.lineage(r, wc) for r, wc in made_by] or ["source", path])
            self._lineage[key] = _digest(self.code(rulename), self.params(rulename, wildcards), upstream)
        return self._lineage[key]

    def lineage_param(self):
        """The `lineage` params function every rule with outputs declares (`lineage=LINEAGE`).

        It takes only `wildcards`: Snakemake treats a params function that takes `input` or `output` as
        derived from files and leaves it out of its params trigger, which is the one thing lineage is for.
        The rule is the one Snakemake is expanding the params of (the caller's frame)."""

        def lineage_of(wildcards):
            return self.lineage(_calling_rule(), dict(wildcards.items()))

        return lineage_of

    def unmade_artifacts(self, publish: dict) -> list[str]:
        """publish.artifacts given as a literal path that no rule of this workflow makes (the gate would refuse it,
        but only in its job, saying to build it): one line per entry, with its key. A glob is the gate's to expand."""
        import glob

        return [f"publish.artifacts[{i}].path = {a['path']!r}: no rule of this workflow makes it; allowed: a file a "
                "rule makes (results/ladder.csv, results/grades/<style>.csv, ...), or a glob under a literal results/ "
                "folder" for i, a in enumerate(publish.get("artifacts") or [])
                if not glob.has_magic(a["path"]) and not self.producers(os.path.normpath(a["path"]))]

    def requested_paths(self, targets) -> set[str]:
        """Every file the requested DAG reads or writes (outputs, logs and benchmarks included)."""
        return self._requested(targets)[0]

    def _requested(self, targets) -> tuple[set[str], set]:
        key = tuple(targets)
        if key not in self._walks:
            self._walks[key] = self._walk(targets)
        return self._walks[key]

    def _walk(self, targets) -> tuple[set[str], set]:
        todo, seen, jobs = [], set(), set()
        for target in targets:
            if self.wf.is_rule(target):
                rule = self.wf.get_rule(target)
                if not rule.has_wildcards():
                    todo.append((rule.name, {}))
            else:
                todo.append(("", {"path": os.path.relpath(target) if os.path.isabs(target) else target}))
        while todo:
            rulename, wc = todo.pop()
            if not rulename:
                path = os.path.normpath(wc["path"])
                if path in seen:
                    continue
                seen.add(path)
                todo.extend(self.producers(path))
                continue
            key = (rulename, tuple(sorted(wc.items())))
            if key in jobs:
                continue
            jobs.add(key)
            if self.wf.get_rule(rulename).output:
                seen.update(os.path.normpath(str(f)) for f in self.outputs(rulename, wc))
            todo.extend(("", {"path": p}) for p in self.inputs(rulename, wc))
        return seen, jobs

    def unknown_target(self, target: str) -> str | None:
        """Why no rule makes `target`, when a rule's output pattern has its shape but a wildcard's value is
        not allowed (Snakemake says only "No rule to produce"): the wildcard, the value, what is allowed."""
        import re

        from snakemake.io import WILDCARD_REGEX

        path = as_file_target(target)
        if self.wf.is_rule(target) or self.producers(path) or os.path.exists(path):
            return None
        constraints = dict(self.wf.wildcard_constraints)
        for rule in self.wf.rules:
            for pattern in rule.output:
                text, regex, pos = str(pattern), "", 0
                names = []
                for m in WILDCARD_REGEX.finditer(text):
                    regex += re.escape(text[pos:m.start()]) + f"(?P<{m.group('name')}>.+)"
                    names.append((m.group("name"), m.group("constraint")))
                    pos = m.end()
                found = re.fullmatch(regex + re.escape(text[pos:]), path) if names else None
                if not found:
                    continue
                rule_constraints = {**constraints, **dict(getattr(rule, "wildcard_constraints", None) or {})}
                for name, inline in names:
                    allowed = inline or rule_constraints.get(name)
                    allowed = getattr(allowed, "pattern", allowed)
                    value = found.group(name)
                    if allowed and not re.fullmatch(str(allowed), value):
                        shown = ", ".join(str(allowed).split("|")) if re.fullmatch(r"[\w|.-]+", str(allowed)) else allowed
                        return (f"target {target}: no rule makes it: {name} = {value!r} is not allowed for rule "
                                f"{rule.name} ({pattern}); allowed: one of {shown} (from the config)")
        # names the config expands into a rule's outputs (render's az{az}.png, generate's {condition}/az{az}.png): the
        # outputs of one rule that differ from the target in one part of the path, of the same extension, name
        # what is allowed there (a whole part: az017.png against az000.png, az045.png, never '17' against '00')
        def part_matches(piece: str, value: str) -> bool:
            if not WILDCARD_REGEX.search(piece):
                return piece == value
            regex, pos = "", 0
            for m in WILDCARD_REGEX.finditer(piece):
                regex += re.escape(piece[pos:m.start()]) + "[^/]+"
                pos = m.end()
            return re.fullmatch(regex + re.escape(piece[pos:]), value) is not None

        parts = path.split(os.sep)
        best = None
        for rule in self.wf.rules:
            found_parts: dict[int, set[str]] = {}
            for out in rule.output:
                pieces = os.path.normpath(str(out)).split(os.sep)
                if len(pieces) != len(parts):
                    continue
                differ = [i for i, (piece, value) in enumerate(zip(pieces, parts)) if not part_matches(piece, value)]
                if len(differ) == 1 and os.path.splitext(pieces[differ[0]])[1] == os.path.splitext(parts[differ[0]])[1]:
                    found_parts.setdefault(differ[0], set()).add(pieces[differ[0]])
            for i, names in found_parts.items():  # one sibling is a file of its own (ladder.csv), not a list
                if len(names) > 1 and (best is None or len(names) > len(best[2])):
                    best = (rule.name, i, sorted(names))
        if best:
            name, i, names = best
            folder = os.sep.join(parts[:i]) + os.sep if i else ""
            shown = ", ".join(names[:24]) + (f", ... ({len(names)} in all)" if len(names) > 24 else "")
            return (f"target {target}: no rule makes it: {parts[i]!r} is not one rule {name} makes in "
                    f"{folder or 'the working directory'}; allowed: one of {shown} (from the config)")
        # no output of any rule has its shape (Snakemake says only "No rule to produce")
        rules = sorted(r.name for r in self.wf.rules if not r.has_wildcards())
        return (f"target {target}: no rule makes it, and no file is there; allowed: a rule ({', '.join(rules)}), or a "
                "file one makes, such as results/ladder.csv or results/drift/<style>.csv (`snakemake "
                "--list-target-rules`; docs/stages.md lists every output)")

    def unknown_rule_options(self, settings) -> list[str]:
        """--forcerun, --until and --omit-from names that are neither a rule nor a file a rule makes: Snakemake says
        only "No rule to produce genrate" (--forcerun, --until) or nothing at all (--omit-from: silently omits none)."""
        rules = sorted(rule.name for rule in self.wf.rules)
        out = []
        for option, names in (("--forcerun", settings.forcerun), ("--until", settings.until),
                              ("--omit-from", settings.omit_from)):
            for name in sorted(names):
                if not (self.wf.is_rule(name) or self.producers(as_file_target(name)) or os.path.exists(name)):
                    out.append(f"{option} {name}: no rule of that name, and no file a rule makes; allowed: a rule "
                               f"({', '.join(rules)}) or an output file of one")
        return out

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
                self.slurm_cluster()
            except machines.MachinesError as err:
                from snakemake.exceptions import WorkflowError

                raise WorkflowError(f"invalid machines (nothing was run or written):\n  {err}") from None
            self.take_the_directory(kwargs)
            self.drop_slurm_resources()
            settings = wf.dag_settings
            if settings is None:
                return prepare(*args, **kwargs)
            targets = list(settings.targets) or ([wf.default_target] if wf.default_target else [])
            unknown = [why for t in targets if (why := self.unknown_target(t))]
            unknown += self.unknown_rule_options(settings)
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

    # ---------------------------------------------------------------------------------------- asks
    def placement(self) -> dict[str, str]:
        """Profile tag -> the machine the executor moves its jobs to (fourloops.machines.placement), once per
        executor."""
        executor = self.executor()
        if executor not in self._placements:
            self._placements[executor] = machines.placement(executor, self.machines)
        return self._placements[executor]

    def placed_on(self, rulename: str, wildcards: dict) -> str:
        """The machine whose asks a job takes: the one the executor moves it to (a pod job under the RunPod
        executor: the pod's probes, allocator and card), else the target."""
        moved = self.placement()
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
        return self.executor() == "runpod" and self.profile(rulename, wildcards) in self.placement()

    def context_for(self, rulename: str, wildcards: dict) -> AskContext:
        """The ask context of one job: the machine it is placed on, rented or started by this Snakemake."""
        return self.ask_context(self.placed_on(rulename, wildcards), self.rented(rulename, wildcards))

    def ask(self, rulename: str, wildcards: dict) -> asks.Ask:
        ctx = self.context_for(rulename, wildcards)
        key = (ctx.machine, ctx.rented, rulename, tuple(sorted(wildcards.items())))
        if key not in self._asks:
            self._asks[key] = self.stage(rulename).ask_for(ctx, wildcards, self.params(rulename, wildcards))
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
            self._ask_contexts[(name, rented)] = AskContext(
                facts, dataclasses.replace(self.measured, allocator=allocator), name, rented)
        return self._ask_contexts[(name, rented)]

    def set_target(self, machine_name: str) -> None:
        """Judge the asks for `machine_name` (its own probes first), whatever the run's config machine says."""
        if machine_name != self.target:
            self.target = machine_name
            self._ask_contexts.clear()
            self._asks.clear()
            self._slurm.clear()

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

    # ------------------------------------------------------------------------------ before any job
    def executor(self) -> str | None:
        """The executor the jobs run under: a dry-run's own is Snakemake's `dryrun`; `fourloops plan` sets the one
        the run would use (planned_executor), so that the plan places jobs as that run would."""
        return self.planned_executor or getattr(self.wf.executor_plugin, "name", None)

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
            rule=rulename, output=key, profile=self.profile(rulename, wildcards), ask=self.ask(rulename, wildcards),
            wildcards=wildcards, params=self.params(rulename, wildcards), context=self.context_for(rulename, wildcards),
            local=rulename in self.local_rules(),
        )

    def local_rules(self) -> set[str]:
        """The rules the workflow declares local (`localrule: True`: the publication gate). Snakemake's own is_local
        holds every rule under a local executor, a dry-run's included, so the plan of a SLURM run could not ask it."""
        return set(getattr(self.wf, "_localrules", ()))

    def provided_vram_mb(self) -> int | None:
        provided = machines.resource_value(self.wf.global_resources, "vram_mb")
        return int(provided) if isinstance(provided, (int, float)) and provided < 2**40 else None

    def check_walls(self, dag, machine_name: str | None = None, own_resources: bool = True) -> walls.Verdict:
        """Every pending job against the machine it will run on (check)."""
        return self.check(self.pending(dag), machine_name, own_resources)

    def check(self, jobs: list[walls.PendingJob], machine_name: str | None = None,
              own_resources: bool = True) -> walls.Verdict:
        """`jobs` (pending_job's) each against the machine it will run on (config machine, or the pod under its
        executor; on a SLURM cluster, the partition fourloops.slurm chooses: the verdict then carries `placed`);
        the verdict's `on` holds the machine each job was judged on."""
        target = self.here(machine_name)  # under the RunPod executor never a cluster: nothing goes to one
        cluster = target if target in machines.clusters(self.machines) else (
            None if machine_name else self.slurm_cluster())
        if cluster is not None:
            from fourloops import slurm

            return slurm.place(jobs, self.machines, cluster).verdict
        # this invocation's --resources vram_mb caps jobs run from here; asked about another machine, its own
        # profile would declare that machine's card
        provided = self.provided_vram_mb() if own_resources and target == self.here(self.config["machine"]) else None
        return walls.check_jobs(jobs, self.machines, target, provided, self.placement())

    def local_jobs(self, dag, placed=None):
        """Pending jobs with work of their own (has_work, as `pending`: the publication gate's too) that run on this
        machine (pod jobs meet their needs on the pod, partition jobs on the node). `placed`: the run's SLURM
        placement where the caller has it (before_first_job), so the walls are not checked again."""
        remote = machines.remote_tags(self.executor(), self.machines)
        jobs = [j for j in dag.needrun_jobs()
                if has_work(j) and self.profile(j.rule.name, dict(j.wildcards.items())) not in remote]
        if self.executor() == "slurm":  # partition jobs meet their needs on the node
            placed = placed or self.check_walls(dag).placed
            jobs = [j for j in jobs if placed.where.get(job_key(j), "").startswith("here")]
        return jobs

    def _pending_needs(self, dag, keep) -> list[str]:
        """preflight.problems over the stage needs `keep(job, need)` takes of the pending jobs; a model file or
        directory the run's own jobs write (the sizing set's models) is made by the run, not missing."""
        from fourloops import preflight

        needs = [n for j in dag.needrun_jobs() if has_work(j)
                 for n in self.stage(j.rule.name).needs_for(dict(j.params.items())) if keep(j, n)]
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
        if self.executor() != "runpod":
            return []
        from fourloops.model_sets import LOCAL_WEIGHT_KEYS

        on_pod = machines.remote_tags("runpod", self.machines)
        found: dict[tuple[str, str], str] = {}
        for job in dag.needrun_jobs():
            wc = dict(job.wildcards.items())
            if not job.rule.output or self.profile(job.rule.name, wc) not in on_pod:
                continue
            for name, w in (self.params(job.rule.name, wc).get("local_weights") or {}).items():
                where = (LOCAL_WEIGHT_KEYS[name], w["path"])  # named by the first rule by name (needrun order is a
                found[where] = min(found.get(where, job.rule.name), job.rule.name)  # set's)
        return [f"config {key} = {path!r} is a directory on this machine (rule {rule}, which runs on a RunPod pod): "
                "the pod's container has none of this machine's files and nothing uploads weights; name the hub id "
                "pinned at a commit (the pod downloads it), or run without `--executor runpod`"
                for (key, path), rule in sorted(found.items())]

    def before_first_job(self, dag) -> None:
        """onstart: refuse what cannot fit (seconds, no torch), then, for a real run, what is missing here;
        mark the working directory with its model set only once the run is allowed to start."""
        from snakemake.exceptions import WorkflowError

        verdict = self.check_walls(dag)
        placed = getattr(verdict, "placed", None)
        if not verdict.ok:
            from fourloops import refusal

            raise WorkflowError(refusal.cluster_report(placed, self.machines) if placed
                                else refusal.report(verdict, self.machines))
        if placed is not None and self.executor() == "slurm":
            self.wf.localrules(*placed.local_rules)  # desk-device jobs run on this machine
        if self.config["model_set"] != "smoke":
            from fourloops import preflight

            missing = self.preflight_problems(dag, placed)
            if missing:
                raise WorkflowError(preflight.report(missing, self.config["model_set"]))
        if full := self.space_problems(dag, placed):
            raise WorkflowError("\n".join(full))
        self.point_jobs_here()
        MODEL_SET_MARKER.write_text(self.config["model_set"] + "\n")
        self.stash_last_good(dag)
        self.retire_checkpoints(dag)

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

    def retire_checkpoints(self, dag) -> None:
        """A job that resumes from checkpoints (its `checkpoint_dir` param: the LoRA's) resumes only from those its
        own lineage wrote: the training's fingerprint holds its config and inputs, not the code, so a checkpoint left
        by a killed run of other code would be continued under the new lineage, half one and half the other. The
        lineage each pending job that checkpoints on this filesystem runs under is kept in CHECKPOINT_LINEAGE;
        another lineage's checkpoints, or ones no run of this workflow recorded, are removed before the job, saying
        so."""
        import shutil

        from fourloops.io import read_json, write_json

        table_path = Path(CHECKPOINT_LINEAGE)
        table = read_json(table_path) if table_path.is_file() else {}
        changed = False
        pod = set(self.placement())  # a pod's checkpoints stay on the pod
        for job in dag.needrun_jobs():  # here, or on a SLURM node, which resumes from the shared filesystem
            if not job.rule.output or self.profile(job.rule.name, dict(job.wildcards.items())) in pod:
                continue
            params = dict(job.params.items())
            where, lineage = params.get("checkpoint_dir"), params.get("lineage")
            if not where or not lineage:
                continue
            where = os.path.normpath(str(where))
            if Path(where).is_dir() and any(Path(where).iterdir()) and table.get(where) != lineage:
                said = ("another lineage (its code, config or inputs since changed)" if where in table else
                        "a run that recorded no lineage")
                print(f"fourloops: removing the checkpoints in {where}, written under {said}: rule {job.rule.name} "
                      "trains from its first step", file=sys.stderr)
                shutil.rmtree(where)
            if table.get(where) != lineage:
                table[where] = lineage
                changed = True
        if changed:
            write_json(table_path, table)

    # ------------------------------------------------------------------- the last good outputs (keep)
    def _keep_files(self, job):
        from fourloops import keep

        outputs = [str(f) for f in job.output]
        p = self.wf.persistence
        if not hasattr(p, "_record_path"):  # the database backend: each output's record is a row of its table
            return keep.JobFiles(outputs, rows=[DatabaseRecords(p).key(f) for f in job.output])
        return keep.JobFiles(
            outputs,
            records=[p._record_path(p._metadata_path, f) for f in outputs],
            markers=[p._record_path(p._incomplete_path, f) for f in outputs],
        )

    def stash_last_good(self, dag) -> None:
        """Hard-link the outputs of pending jobs whose stage keeps its last good outputs (money was spent)."""
        from fourloops import keep

        jobs = [j for j in dag.needrun_jobs() if j.rule.output and self.stage(j.rule.name).keep_last_good]
        keep.stash(Path.cwd(), [self._keep_files(j) for j in jobs], rows=self._database_records())

    def settle_last_good(self) -> None:
        """After the run: a job that failed gets its previous outputs back; the stash is dropped."""
        import sys

        from fourloops import keep

        for path in keep.settle(Path.cwd(), self._database_records()):
            print(f"fourloops: kept the last good {path} (its new generation failed)", file=sys.stderr)

    def recover_last_good(self) -> None:
        """A stash left by a Snakemake that was killed is settled at the workflow's parse, before its provenance
        records are read and before the DAG is built."""
        from fourloops import keep

        if self.main_process() and keep.stash_dir(Path.cwd()).exists():
            keep.recover(Path.cwd(), self._database_records())

    def _database_records(self) -> "DatabaseRecords | None":
        """Where this run keeps Snakemake's records when it keeps them in a database (`--persistence-backend db`);
        at the parse (a killed run's stash) its persistence is not made yet: one is opened as Snakemake opens it."""
        p = self.wf.persistence
        if p is None:
            settings = self.wf.workflow_settings
            if settings.persistence_backend.name == "FILE":
                return None
            from snakemake.persistence.db import DbPersistence

            p = DbPersistence(nolock=True, db_url=settings.persistence_backend_db_url)
        return None if hasattr(p, "_record_path") else DatabaseRecords(p)


class DatabaseRecords:
    """Snakemake's record of each output under `--persistence-backend db`, a row of its table keyed by (the working
    directory's .snakemake, the output path), read and put back for fourloops.keep (its `Rows`) through the
    persistence object's own record API. That API is private to the pinned Snakemake (9.27.1:
    DbPersistence._get_key, _read_record, _write_record, _delete_record); this class is the one place using it."""

    def __init__(self, persistence):
        self.persistence = persistence
        # the database without its password (a URL may carry one), and the namespace of this working directory
        from fourloops.verify import shown_db_url

        self.where = f"{shown_db_url(persistence.engine.url)} (namespace {persistence.namespace})"

    def key(self, output) -> str:
        return self.persistence._get_key(output)

    def read(self, key: str) -> dict | None:
        row = self.persistence._read_record(key)
        return None if row is None else row.model_dump(mode="json")

    def write(self, key: str, row: dict | None) -> None:
        from snakemake.persistence import MetadataRecord

        if row is None:
            self.persistence._delete_record(key)
        else:
            self.persistence._write_record(key, MetadataRecord.model_validate(row))


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
