"""The publication gate: all listed artifacts are published, or none is.

RFD 1163: the seeds' publish_artifacts.py refused any name containing nf4, int4 or int8, which also
refuses a legitimate quantised HEF. This gate tells a quantised *corpus* (results others train or
measure on, refused) from a quantised *deliverable* (a thing that ships, allowed, its precision in
the manifest). The name check is a backstop; the provenance records are the truth.

Rules (numbers are what a refusal names):
  1 corpus name      a corpus artifact's path carries a deny token (nf4, int4, int8 by default)
  2 corpus precision a corpus artifact was made, at any depth of its lineage, with a quantised model
                     whose precision the config does not allow for that artifact
  3 deliverable      a deliverable's own record lacks its precision, or its path carries a precision token
  4 smoke            anything in the artifact's lineage was made by the smoke or sizing model set (or says no model set)
  5 provenance       the artifact is missing, no record lists it, its sha256 differs from its record,
                     or a link of its lineage no longer matches the bytes that were used
  6 out of date      Snakemake would rebuild it (its inputs, params or code changed): rebuild first
  7 dirty tree       the tree is dirty (now, or when anything in the lineage was made) and the config
                     does not allow it; when allowed, the manifest says dirty
  8 determinism      a job of the lineage held a GPU, or applied the determinism settings, and its record does not
                     show them on (fourloops.determinism): its bytes would not be reproducible on its machine kind

Lineage: the producing record's inputs are followed by (path, sha256) to the records that produced
exactly those bytes, all the way to files no record produced (renders' sources, user checkpoints).
A ladder table made from keypoints made from views made by an nf4 generator is an nf4-derived corpus.

Paths are relative to the Snakemake working directory. Functions take paths and plain values; only
`snakemake_staleness` runs Snakemake (a dry-run summary in a subprocess).

Modules, one per concern: listing (config -> artifacts), lineage (walking the provenance records of
fourloops.records), precision (names and quantisation), rules (the eight rules), refusals (what a
refusal says, and its table), staleness (rule 6: Snakemake's dry-run summary), manifest, swap (the
atomic publication).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from fourloops import records
from fourloops.gate.lineage import Lineage, chain, lineage
from fourloops.gate.listing import KINDS, Artifact, expand_artifacts
from fourloops.gate.manifest import MANIFEST, build_manifest
from fourloops.gate.precision import (
    DEFAULT_DENY, FULL_PRECISIONS, PRECISION_TOKENS, is_quantised, name_tokens, record_precisions,
)
from fourloops.gate.refusals import RULES, Refusal, refusal_table
from fourloops.gate.rules import evaluate
from fourloops.gate.staleness import STALE_TRIGGERS, parse_summary, snakemake_staleness
from fourloops.gate.swap import publish

__all__ = [
    "DEFAULT_DENY", "FULL_PRECISIONS", "KINDS", "MANIFEST", "PRECISION_TOKENS", "RULES", "STALE_TRIGGERS",
    "Artifact", "Lineage", "Outcome", "Refusal", "build_manifest", "chain", "evaluate", "expand_artifacts", "judge",
    "is_quantised", "lineage", "name_tokens", "parse_summary", "publish", "record_precisions",
    "refusal_table", "report", "run_gate", "snakemake_staleness",
]


@dataclass
class Outcome:
    refusals: list[Refusal]
    manifest: dict | None
    published: Path | None


def judge(
    workdir: str | Path,
    listing: list[dict],
    *,
    deny_patterns: Iterable[str] = DEFAULT_DENY,
    allow_dirty: bool = False,
    code: dict | None,
    stale,
    out: str = "results/published",
) -> tuple[list[Artifact], list[Refusal], dict]:
    """Expand the listing and judge every artifact, publishing nothing: (artifacts, refusals, what evaluate found).
    An empty listing is refused. `stale` as run_gate's (a dict of reasons, every path None: rule 6 not asked)."""
    artifacts, refusals = expand_artifacts(listing, workdir, out)
    if callable(stale):
        stale = stale([a.path for a in artifacts if (Path(workdir) / a.path).is_file()])
    more, found = evaluate(workdir, artifacts, records.index(workdir), deny_patterns=deny_patterns,
                           allow_dirty=allow_dirty, code=code, stale=stale)
    refusals += more
    if not artifacts and not refusals:
        refusals = [Refusal("(publish.artifacts)", 5, "nothing is listed for publication",
                            "list artifacts under publish.artifacts")]
    return artifacts, refusals, found


def run_gate(
    workdir: str | Path,
    listing: list[dict],
    *,
    deny_patterns: Iterable[str] = DEFAULT_DENY,
    allow_dirty: bool = False,
    code: dict | None,
    stale,
    invocation: str = "",
    out: str = "results/published",
) -> Outcome:
    """Expand the listing, judge every artifact, and publish all of them or none.

    `stale` is a dict path -> reason|None, or a callable taking the artifact paths and returning one
    (so Snakemake is asked only about the paths the listing expands to).
    """
    artifacts, refusals, found = judge(workdir, listing, deny_patterns=deny_patterns, allow_dirty=allow_dirty,
                                       code=code, stale=stale, out=out)
    if refusals:
        return Outcome(refusals, None, None)
    manifest = build_manifest(artifacts, found, code=code, allow_dirty=allow_dirty, invocation=invocation)
    record_paths = [r.path for _, lin, _ in found.values() for r in lin.records]
    return Outcome([], manifest, publish(workdir, artifacts, manifest, out=out, records=record_paths))


def report(outcome: Outcome) -> str:
    if outcome.refusals:
        n = len({r.artifact for r in outcome.refusals})
        return (f"publication refused: {n} artifact(s) broke the gate; nothing was published "
                f"(results/published/ is as it was)\n" + refusal_table(outcome.refusals))
    arts = outcome.manifest["artifacts"]
    lines = [f"published {len(arts)} artifact(s) to {outcome.published} ({MANIFEST}):"]
    for name, a in arts.items():
        lines.append(f"  {name}  {a['kind']}  precision {a['precision']}  sha256 {a['sha256'][:12]}")
    return "\n".join(lines)
