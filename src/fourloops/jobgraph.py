"""The workflow's jobs as its rules expand them: a job's params, input and output files, the jobs that make a file,
the code a rule's jobs run, and a job's lineage (everything upstream of it).

A job is (rule name, wildcards); the graph reads Snakemake's rules (the workflow object it is given) and expands each
job once. The `lineage` param every rule with outputs declares comes from here (`lineage_param`), and so do the files
a requested DAG reads or writes (`requested_paths`, for the report's plan before Snakemake has a DAG).
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import hashlib
import json
import os
import sys

from fourloops import lineage
from fourloops.stage import stage_for

LINEAGE_PARAM = "lineage"


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


class JobGraph:
    """The jobs of one Snakemake workflow (`workflow`, Snakemake's object), each expanded once."""

    def __init__(self, workflow):
        self.wf = workflow
        # (rule, wildcards) -> what besides params, code and inputs a job's bytes depend on (the batch a stage whose
        # bytes change with it runs at on its machine: fourloops.batching), or None; set by the facade
        self.identity = None
        self._params: dict = {}
        self._lineage: dict = {}
        self._producers: dict = {}
        self._walks: dict = {}
        self._inputs: dict = {}
        self._outputs: dict = {}
        self._products = None  # the rules' output patterns by constant prefix (_patterns), built on first use

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

    def _patterns(self) -> tuple[dict, dict]:
        """Every product (output, log, benchmark) of every rule with outputs, by its constant prefix and then its
        constant suffix, as Snakemake's OutputIndex keeps them, but per pattern: a path is matched only against the
        patterns whose constant prefix and suffix it has, the only ones that can match it.

        The prefixes are found without a walk over all of them (Snakemake's PrefixLookup bisects over every prefix
        and steps back one common prefix at a time, a few dozen Python calls a path): a prefix whose patterns have no
        wildcard matches only the path it is (`exact`: a rule whose outputs the config expands, render's az000.png
        ..., has one such prefix per file, hundreds in all), and the others (`under`) are kept by the folder they
        end in, so a path asks only the folders above it."""
        if self._products is None:
            groups: dict[str, dict[str, list]] = {}
            for rule in self.wf.rules:
                if rule.output:
                    for i, o in enumerate(rule.products()):
                        groups.setdefault(str(o.constant_prefix()), {}).setdefault(
                            str(o.constant_suffix()), []).append((rule, i, o))
            exact: dict[str, tuple] = {}
            under: dict[str, list] = {}  # folder (up to its last /, "" for none) -> [(prefix, group)]
            for prefix, by_suffix in groups.items():
                group = (sorted({len(s) for s in by_suffix}), by_suffix)
                if any(o.get_wildcard_names() for patterns in by_suffix.values() for _, _, o in patterns):
                    under.setdefault(prefix[:prefix.rfind("/") + 1], []).append((prefix, group))
                else:
                    exact[prefix] = group
            self._products = (exact, under)
        return self._products

    def _candidates(self, path: str):
        """The (lengths of the constant suffixes, patterns by constant suffix) of each constant prefix of `path`."""
        exact, under = self._patterns()
        if (group := exact.get(path)) is not None:
            yield group
        end = 0
        while True:
            for prefix, group in under.get(path[:end], ()):
                if path.startswith(prefix):
                    yield group
            end = path.find("/", end) + 1
            if not end:
                return

    def producers(self, path: str) -> list[tuple[str, dict]]:
        """(rule, wildcards) of the jobs that would make `path` (none for a source file)."""
        if path not in self._producers:
            matched: dict = {}  # rule -> [(index of the pattern in rule.products(), its wildcards)]
            for lengths, by_suffix in self._candidates(path):
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

    def code(self, rulename: str) -> str:
        """Digest of the library code a rule's jobs run: its stage's code module's import closure and its script
        (never its declaration: fourloops.declarations)."""
        rule = self.wf.get_rule(rulename)
        extra = []
        if rule.script:
            extra.append(os.path.normpath(os.path.join(os.path.dirname(rule.snakefile), rule.script)))
        stage = stage_for(rulename)
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
            extra = self.identity(rulename, wildcards) if self.identity is not None else None
            parts = (self.code(rulename), self.params(rulename, wildcards), upstream)
            self._lineage[key] = _digest(*parts) if extra is None else _digest(*parts, extra)
        return self._lineage[key]

    def lineage_param(self):
        """The `lineage` params function every rule with outputs declares (`lineage=LINEAGE`).

        It takes only `wildcards`: Snakemake treats a params function that takes `input` or `output` as
        derived from files and leaves it out of its params trigger, which is the one thing lineage is for.
        The rule is the one Snakemake is expanding the params of (the caller's frame)."""

        def lineage_of(wildcards):
            return self.lineage(_calling_rule(), dict(wildcards.items()))

        return lineage_of

    def requested_paths(self, targets) -> set[str]:
        """Every file the requested DAG reads or writes (outputs, logs and benchmarks included)."""
        key = tuple(targets)
        if key not in self._walks:
            self._walks[key] = self._walk(targets)
        return self._walks[key][0]

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
