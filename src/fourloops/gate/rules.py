"""The eight rules, judged per artifact (numbers as in fourloops.gate's docstring and RULES)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from fourloops.determinism import reproducible
from fourloops.gate.lineage import Lineage, chain, lineage
from fourloops.gate.listing import Artifact
from fourloops.gate.precision import DEFAULT_DENY, PRECISION_TOKENS, is_quantised, name_tokens, record_precisions
from fourloops.gate.refusals import Refusal
from fourloops.io import sha256_file
from fourloops.records import ProvenanceIndex, Record


def evaluate(
    workdir: str | Path,
    artifacts: list[Artifact],
    index: ProvenanceIndex,
    *,
    deny_patterns: Iterable[str] = DEFAULT_DENY,
    allow_dirty: bool = False,
    code: dict | None = None,
    stale: dict[str, str | None] | None = None,
) -> tuple[list[Refusal], dict[str, tuple[Record, Lineage, dict]]]:
    """Every refusal for every artifact (rules 1-8), and, per artifact that has one, its producing
    record, lineage and current file entry (for the manifest).

    `code` is the tree's code version now ({commit, dirty}); `stale` maps each artifact path to None
    (Snakemake would not rebuild it) or the reason it would (rule 6); a path missing from `stale` was
    not judged and is refused.
    """
    workdir = Path(workdir)
    deny = [p.lower() for p in deny_patterns]
    refusals: list[Refusal] = []
    found: dict[str, tuple[Record, Lineage, dict]] = {}

    def refuse(art: Artifact, rule: int, evidence: str, fix: str) -> None:
        refusals.append(Refusal(art.path, rule, evidence, fix))

    # rule 7, the tree as it is now (one refusal per artifact keeps the table per artifact)
    tree_dirty = code is None or code.get("commit") is None or bool(code.get("dirty"))
    for art in artifacts:
        # rule 1 / 3: names
        if art.kind == "corpus":
            hits = name_tokens(art.path, deny)
            if hits:
                refuse(art, 1, f"name carries {', '.join(hits)}",
                       "a corpus name must not say a quantised precision; if it is one, it may not be published")
        if tree_dirty and not allow_dirty:
            what = "not a git checkout" if code is None or code.get("commit") is None else \
                f"uncommitted changes on {code['commit'][:12]}"
            refuse(art, 7, f"the tree now: {what}", "commit (then rebuild), or set publish.allow_dirty: true")

        # rule 5: the file and its record
        file = workdir / art.path
        if not file.is_file():
            refuse(art, 5, "the file does not exist", f"build it: snakemake {art.path}")
            continue
        # rule 6: Snakemake's own judgement
        if stale is None or art.path not in stale:
            refuse(art, 6, "Snakemake did not judge it (no dry-run summary lists it)",
                   "publish only what a rule of this workflow makes")
        elif stale[art.path]:
            refuse(art, 6, f"Snakemake would rebuild it: {stale[art.path]}",
                   f"rebuild first: snakemake {art.path}")
        sha = sha256_file(file)
        entry = {"path": art.path, "sha256": sha, "bytes": file.stat().st_size}
        producers = index.producers(art.path)
        if not producers:
            refuse(art, 5, "no provenance record under results/provenance lists it as an output",
                   f"rebuild it through the workflow: snakemake --forcerun {art.path}")
            continue
        producer = index.producer(art.path, sha)
        if producer is None:
            recorded = ", ".join(f"{r.path} says {e.get('sha256', '?')[:12]}" for r, e in producers)
            refuse(art, 5, f"sha256 {sha[:12]} now; {recorded}",
                   f"the file changed after it was made; rebuild: snakemake --forcerun {art.path}")
            continue
        lin = lineage(index, producer)
        found[art.path] = (producer, lin, entry)
        for link in lin.broken:
            refuse(art, 5, f"lineage broken: {link}", f"rebuild: snakemake --forcerun {art.path}")

        # rule 4: smoke anywhere upstream
        for rec in lin.records:
            model_set = rec.data.get("model_set")
            if model_set == "smoke":
                refuse(art, 4, f"{chain(lin, rec)}: model_set smoke ({rec.path})",
                       "run with the real model set (not --workflow-profile profiles/smoke); smoke never passes "
                       "for real")
                break
            if model_set == "sizing":
                refuse(art, 4, f"{chain(lin, rec)}: model_set sizing ({rec.path})",
                       "run with the real model set (not --workflow-profile profiles/sizing); the sizing set's random "
                       "weights measure memory and time, never a result")
                break
            if model_set is None:
                refuse(art, 4, f"{chain(lin, rec)}: no model_set recorded ({rec.path})",
                       "rebuild with a workflow version that records model_set")
                break

        # rule 2 / 3: precision
        if art.kind == "corpus":
            for rec in lin.records:
                bad = [p for p in record_precisions(rec.data) if is_quantised(p) and p not in art.allow_precisions]
                if bad:
                    refuse(art, 2, f"{chain(lin, rec)}: precision {', '.join(bad)} ({rec.path})",
                           "regenerate the corpus at full precision (fp32/bf16), or list the precision "
                           "under this artifact's allow_precisions in publish.artifacts")
        elif art.kind == "deliverable":
            precision = producer.data.get("precision")
            if not precision:
                refuse(art, 3, f"{producer.path} records no precision",
                       "the rule that makes a deliverable must record its precision")
            hits = name_tokens(art.path, [*deny, *PRECISION_TOKENS, *([str(precision)] if precision else [])])
            if hits:
                refuse(art, 3, f"name carries {', '.join(hits)}",
                       "name the deliverable for what it is; its precision goes in the manifest")

        # rule 8: every job upstream that computed with torch ran with the determinism settings (a GPU job's bytes
        # are reproducible on its machine kind only so: fourloops.determinism)
        for rec in lin.records:
            settings = rec.data.get("determinism")
            used_cuda = rec.data.get("peak_vram_gib") is not None
            if (settings and settings.get("applied")) or used_cuda:
                ok, why = reproducible(settings)
                if not ok:
                    refuse(art, 8, f"{chain(lin, rec)}: {why} ({rec.path})",
                           f"rebuild it with the settings on (unset FOURLOOPS_DETERMINISM): snakemake --forcerun {rec.data.get('rule')}")
                    break

        # rule 7: the code each record of the lineage was made from
        if not allow_dirty:
            for rec in lin.records:
                rc = rec.data.get("code") or {}
                if rc.get("commit") is None or rc.get("dirty") is not False:
                    what = "no git commit" if rc.get("commit") is None else f"dirty tree on {rc['commit'][:12]}"
                    refuse(art, 7, f"{chain(lin, rec)} was made from a {what} ({rec.path})",
                           "commit, rebuild, then publish; or set publish.allow_dirty: true")
                    break
    order = {a.path: i for i, a in enumerate(artifacts)}
    refusals.sort(key=lambda r: (order.get(r.artifact, -1), r.rule))
    return refusals, found
