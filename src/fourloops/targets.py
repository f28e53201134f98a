"""What a run is asked for, held to what the workflow's rules make: a target, a --forcerun, --until or --omit-from
name, or a publish.artifacts path that no rule makes is named before any job, with what is allowed (Snakemake says
only "No rule to produce", or nothing).

Each check takes Snakemake's workflow object (its rules and wildcard constraints) and `producers`, the jobs that
would make a path (fourloops.jobgraph.JobGraph.producers).
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import os


def as_file_target(name: str) -> str:
    """A file target (or --forcerun, --until, --omit-from name) as Snakemake takes it (workflow.execute's `files`): a
    relative one relative to the working directory, normalized (./results/x.csv, results//x.csv and ../<here>/results/
    x.csv are results/x.csv), an absolute one as it is."""
    return os.path.normpath(name) if os.path.isabs(name) else os.path.relpath(name)


def unknown_target(workflow, producers, target: str) -> str | None:
    """Why no rule makes `target`, when a rule's output pattern has its shape but a wildcard's value is
    not allowed (Snakemake says only "No rule to produce"): the wildcard, the value, what is allowed."""
    import re

    from snakemake.io import WILDCARD_REGEX

    path = as_file_target(target)
    if workflow.is_rule(target) or producers(path) or os.path.exists(path):
        return None
    constraints = dict(workflow.wildcard_constraints)
    for rule in workflow.rules:
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
    for rule in workflow.rules:
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
    rules = sorted(r.name for r in workflow.rules if not r.has_wildcards())
    return (f"target {target}: no rule makes it, and no file is there; allowed: a rule ({', '.join(rules)}), or a "
            "file one makes, such as results/ladder.csv or results/drift/<style>.csv (`snakemake "
            "--list-target-rules`; docs/stages.md lists every output)")

def unknown_rule_options(workflow, producers, settings) -> list[str]:
    """--forcerun, --until and --omit-from names that are neither a rule nor a file a rule makes: Snakemake says
    only "No rule to produce genrate" (--forcerun, --until) or nothing at all (--omit-from: silently omits none)."""
    rules = sorted(rule.name for rule in workflow.rules)
    out = []
    for option, names in (("--forcerun", settings.forcerun), ("--until", settings.until),
                          ("--omit-from", settings.omit_from)):
        for name in sorted(names):
            if not (workflow.is_rule(name) or producers(as_file_target(name)) or os.path.exists(name)):
                out.append(f"{option} {name}: no rule of that name, and no file a rule makes; allowed: a rule "
                           f"({', '.join(rules)}) or an output file of one")
    return out


def unmade_artifacts(producers, publish: dict) -> list[str]:
    """publish.artifacts given as a literal path that no rule of this workflow makes (the gate would refuse it,
    but only in its job, saying to build it): one line per entry, with its key. A glob is the gate's to expand."""
    import glob

    return [f"publish.artifacts[{i}].path = {a['path']!r}: no rule of this workflow makes it; allowed: a file a "
            "rule makes (results/ladder.csv, results/grades/<style>.csv, ...), or a glob under a literal results/ "
            "folder" for i, a in enumerate(publish.get("artifacts") or [])
            if not glob.has_magic(a["path"]) and not producers(os.path.normpath(a["path"]))]
