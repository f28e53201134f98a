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
  4 smoke            anything in the artifact's lineage was made by the smoke model set (or says no model set)
  5 provenance       the artifact is missing, no record lists it, its sha256 differs from its record,
                     or a link of its lineage no longer matches the bytes that were used
  6 out of date      Snakemake would rebuild it (its inputs, params or code changed): rebuild first
  7 dirty tree       the tree is dirty (now, or when anything in the lineage was made) and the config
                     does not allow it; when allowed, the manifest says dirty

Lineage: the producing record's inputs are followed by (path, sha256) to the records that produced
exactly those bytes, all the way to files no record produced (renders' sources, user checkpoints).
A ladder table made from keypoints made from views made by an nf4 generator is an nf4-derived corpus.

Paths are relative to the Snakemake working directory. Functions take paths and plain values; only
`snakemake_staleness` runs Snakemake (a dry-run summary in a subprocess).
"""

from __future__ import annotations

import ctypes
import datetime as dt
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from fourloops.io import sha256_file

RULES = {
    1: "corpus name carries a quantised-precision token",
    2: "corpus made with a quantised model",
    3: "deliverable precision not in its provenance / in its name",
    4: "made by the smoke model set",
    5: "provenance missing or does not match",
    6: "out of date",
    7: "dirty git tree",
}
KINDS = ("corpus", "deliverable", "report")
DEFAULT_DENY = ("nf4", "int4", "int8")
# Precisions that are not quantisation. Anything else a record names (nf4, int8, a8_w8, a16_w16, fp8,
# or a name this list does not know) counts as quantised: an unknown precision does not pass as full.
FULL_PRECISIONS = frozenset({"fp64", "fp32", "tf32", "fp16", "bf16", "float64", "float32", "float16", "bfloat16"})
# Tokens a deliverable's name must not carry (besides the deny patterns and its own precision).
PRECISION_TOKENS = (
    "fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4", "nf4", "int2", "int4", "int8", "int16",
    "a8_w8", "a8_w4", "a16_w16", "a16_w8", "w8a8", "w4a16", "w8a16", "q4", "q8", "gptq", "awq",
)
STALE_TRIGGERS = ("mtime", "params", "input", "code", "software-env")
MANIFEST = "MANIFEST.json"


# --------------------------------------------------------------------------- values
@dataclass(frozen=True)
class Artifact:
    path: str                      # relative to the working directory
    kind: str                      # corpus | deliverable | report
    allow_precisions: tuple = ()   # quantised precisions this corpus may carry (rule 2)

    @property
    def name(self) -> str:
        """Where it lands under results/published/: its path without the leading results/."""
        parts = Path(self.path).parts
        return str(Path(*parts[1:])) if len(parts) > 1 and parts[0] == "results" else self.path


@dataclass(frozen=True)
class Refusal:
    artifact: str
    rule: int
    evidence: str
    fix: str

    @property
    def rule_broken(self) -> str:
        return f"{self.rule} {RULES[self.rule]}"


@dataclass
class Record:
    path: str      # the record file, relative to the working directory
    data: dict

    @property
    def label(self) -> str:
        wc = self.data.get("wildcards") or {}
        tag = ",".join(f"{k}={v}" for k, v in sorted(wc.items()))
        return f"{self.data.get('rule', '?')}" + (f"[{tag}]" if tag else "")


@dataclass
class ProvenanceIndex:
    records: list[Record] = field(default_factory=list)
    by_output: dict[str, list[tuple[Record, dict]]] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)

    def producers(self, path: str) -> list[tuple[Record, dict]]:
        return self.by_output.get(_norm(path), [])

    def producer(self, path: str, sha256: str) -> Record | None:
        for record, entry in self.producers(path):
            if entry.get("sha256") == sha256:
                return record
        return None


@dataclass
class Lineage:
    records: list[Record]                 # the producing record first, then upstream, breadth first
    broken: list[str]                     # links whose bytes no record made (rule 5 evidence)
    via: dict[str, str]                   # record path -> the downstream record path that used it


# --------------------------------------------------------------------------- config -> artifacts
def _norm(path: str) -> str:
    return os.path.normpath(str(path))


def expand_artifacts(
    listing: Iterable[dict], workdir: str | Path, out: str = "results/published"
) -> tuple[list[Artifact], list[Refusal]]:
    """Config entries (path or glob pattern, kind, allow_precisions) -> artifacts; a pattern matching
    nothing is refused (rule 5). A pattern never matches the publication itself (nor its temporaries)."""
    workdir = Path(workdir)
    out_dir, out_name = os.path.dirname(_norm(out)), os.path.basename(_norm(out))

    def ours(rel: str) -> bool:
        head = rel[len(out_dir) + 1:] if out_dir and rel.startswith(out_dir + os.sep) else rel
        first = head.split(os.sep, 1)[0]
        return first == out_name or first.startswith(f".{out_name}-")
    artifacts, refusals, seen = [], [], set()
    for entry in listing:
        pattern, kind = entry["path"], entry.get("kind", "corpus")
        allow = tuple(p.lower() for p in entry.get("allow_precisions", []) or [])
        if glob.has_magic(pattern):
            matches = sorted(
                os.path.relpath(p, workdir)
                for p in glob.glob(str(workdir / pattern), recursive=True)
                if os.path.isfile(p) and not ours(os.path.relpath(p, workdir))
            )
            if not matches:
                refusals.append(Refusal(pattern, 5, "the pattern matches no file",
                                        "build it first, or correct publish.artifacts"))
        else:
            matches = [pattern]
        for path in matches:
            path = _norm(path)
            if path in seen:
                continue
            seen.add(path)
            artifacts.append(Artifact(path, kind, allow))
    return artifacts, refusals


# --------------------------------------------------------------------------- provenance
def index_provenance(workdir: str | Path, root: str = "results/provenance") -> ProvenanceIndex:
    """Read every record under `root` once; index them by the paths they list as outputs."""
    workdir = Path(workdir)
    index = ProvenanceIndex()
    for file in sorted((workdir / root).rglob("*.json")):
        rel = os.path.relpath(file, workdir)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            index.unreadable.append(rel)
            continue
        if not isinstance(data, dict):
            index.unreadable.append(rel)
            continue
        record = Record(rel, data)
        index.records.append(record)
        for entry in data.get("outputs") or []:
            if isinstance(entry, dict) and "path" in entry:
                index.by_output.setdefault(_norm(entry["path"]), []).append((record, entry))
    return index


def lineage(index: ProvenanceIndex, producer: Record) -> Lineage:
    """Walk inputs by (path, sha256) to the records that made those bytes, all the way up."""
    order, broken, via = [producer], [], {}
    seen = {producer.path}
    queue = [producer]
    while queue:
        record = queue.pop(0)
        for entry in record.data.get("inputs") or []:
            path, sha = _norm(entry.get("path", "")), entry.get("sha256")
            upstream = index.producer(path, sha)
            if upstream is None:
                if index.producers(path):  # the workflow made this path, but not these bytes
                    broken.append(f"{record.path} used {path} (sha256 {str(sha)[:12]}), which no record made")
                continue                    # a file no rule made: the lineage ends here
            if upstream.path not in seen:
                seen.add(upstream.path)
                via[upstream.path] = record.path
                order.append(upstream)
                queue.append(upstream)
    return Lineage(order, broken, via)


def record_precisions(data: dict) -> list[str]:
    """The precisions a record names: its own and each model's."""
    out = []
    if data.get("precision"):
        out.append(str(data["precision"]).lower())
    for model in data.get("models") or []:
        if isinstance(model, dict) and model.get("precision"):
            out.append(str(model["precision"]).lower())
    return sorted(set(out))


def is_quantised(precision: str) -> bool:
    return precision.lower() not in FULL_PRECISIONS


def _tokens(text: str) -> str:
    return "_" + re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") + "_"


def name_tokens(path: str, tokens: Iterable[str]) -> list[str]:
    """The tokens (case-insensitive, bounded by non-alphanumerics) that `path` carries."""
    haystack = _tokens(path)
    return sorted({t for t in tokens if t and _tokens(t) != "__" and _tokens(t) in haystack})


def _chain(lin: Lineage, record: Record) -> str:
    """'ladder <- fit[source=A] <- generate[condition=A]' for the path from the artifact to `record`."""
    by_path = {r.path: r for r in lin.records}
    steps, cur = [record.label], record.path
    while cur in lin.via:
        cur = lin.via[cur]
        steps.append(by_path[cur].label)
    return " <- ".join(reversed(steps))


# --------------------------------------------------------------------------- the rules
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
    """Every refusal for every artifact (rules 1-7), and, per artifact that has one, its producing
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
                refuse(art, 4, f"{_chain(lin, rec)}: model_set smoke ({rec.path})",
                       "run with the real model set (not --profile profiles/smoke); smoke never passes for real")
                break
            if model_set is None:
                refuse(art, 4, f"{_chain(lin, rec)}: no model_set recorded ({rec.path})",
                       "rebuild with a workflow version that records model_set")
                break

        # rule 2 / 3: precision
        if art.kind == "corpus":
            for rec in lin.records:
                bad = [p for p in record_precisions(rec.data) if is_quantised(p) and p not in art.allow_precisions]
                if bad:
                    refuse(art, 2, f"{_chain(lin, rec)}: precision {', '.join(bad)} ({rec.path})",
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

        # rule 7: the code each record of the lineage was made from
        if not allow_dirty:
            for rec in lin.records:
                rc = rec.data.get("code") or {}
                if rc.get("commit") is None or rc.get("dirty") is not False:
                    what = "no git commit" if rc.get("commit") is None else f"dirty tree on {rc['commit'][:12]}"
                    refuse(art, 7, f"{_chain(lin, rec)} was made from a {what} ({rec.path})",
                           "commit, rebuild, then publish; or set publish.allow_dirty: true")
                    break
    order = {a.path: i for i, a in enumerate(artifacts)}
    refusals.sort(key=lambda r: (order.get(r.artifact, -1), r.rule))
    return refusals, found


def format_table(refusals: list[Refusal]) -> str:
    head = ("artifact", "rule broken", "evidence", "how to fix")
    rows = [(r.artifact, r.rule_broken, r.evidence, r.fix) for r in refusals]
    widths = [max(len(str(row[i])) for row in [head, *rows]) for i in range(3)]
    lines = []
    for row in [head, tuple("-" * w for w in widths) + ("-" * 10,), *rows]:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3])
    return "\n".join(lines)


# --------------------------------------------------------------------------- rule 6: ask Snakemake
def snakemake_staleness(
    snakefile: str | Path,
    workdir: str | Path,
    paths: list[str],
    *,
    configfile: str | Path | None = None,
    python: str = sys.executable,
    timeout: int = 600,
) -> dict[str, str | None]:
    """Snakemake's own judgement of `paths`: a dry-run `--summary` with every rerun trigger, run in a
    subprocess with `--nolock` (it writes nothing, and the calling Snakemake holds the lock).

    Returns path -> None (up to date) or the reason it would be rebuilt. A path the summary does not
    list is left out. If Snakemake fails, every path maps to its error.
    """
    if not paths:
        return {}
    cmd = [python, "-m", "snakemake", "-s", str(snakefile), "--directory", str(workdir),
           "--summary", "--nolock", "--rerun-triggers", *STALE_TRIGGERS, "--cores", "1"]
    if configfile:
        cmd += ["--configfile", str(configfile)]
    cmd += ["--", *paths]
    env = dict(os.environ)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env=env, timeout=timeout)
    if proc.returncode != 0:
        tail = [ln for ln in (proc.stderr + proc.stdout).strip().splitlines() if ln.strip()][-3:]
        reason = "Snakemake could not judge it: " + " | ".join(tail)
        return {p: reason for p in paths}
    return parse_summary(proc.stdout, paths)


def parse_summary(text: str, paths: list[str]) -> dict[str, str | None]:
    """Rows of `snakemake --summary` (output_file, date, rule, log, status, plan) for `paths`."""
    wanted = {_norm(p): p for p in paths}
    rows, header = [], None
    for line in text.splitlines():
        cols = line.split("\t")
        if cols[0] == "output_file":
            header = cols
        elif header is not None and len(cols) == len(header):
            rows.append(dict(zip(header, cols)))
    # the files whose own status says why (params changed, missing, ...), for evidence upstream
    causes = [f"{r['output_file']} {r['status']}" for r in rows
              if r["plan"] == "update pending" and r["status"] != "ok" and "/provenance/" not in r["output_file"]]
    out: dict[str, str | None] = {}
    for row in rows:
        key = _norm(row["output_file"])
        if key not in wanted:
            continue
        if row["plan"] != "update pending":
            out[wanted[key]] = None
        elif row["status"] != "ok":
            out[wanted[key]] = f"{row['status']} (rule {row['rule']})"
        else:
            more = f" (+{len(causes) - 3} more)" if len(causes) > 3 else ""
            out[wanted[key]] = f"rule {row['rule']} would rerun after upstream: {'; '.join(causes[:3]) or '?'}{more}"
    return out


# --------------------------------------------------------------------------- manifest and publication
def _models(lin: Lineage) -> list[dict]:
    out, seen = [], set()
    for rec in lin.records:
        for m in rec.data.get("models") or []:
            if not isinstance(m, dict):
                continue
            item = {k: m.get(k) for k in ("model", "revision", "precision", "backend") if m.get(k) is not None}
            key = json.dumps(item, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append({**item, "used_by": rec.label})
    return out


def build_manifest(
    artifacts: list[Artifact],
    found: dict[str, tuple[Record, Lineage, dict]],
    *,
    code: dict | None,
    allow_dirty: bool,
    invocation: str = "",
    now: dt.datetime | None = None,
) -> dict:
    """A lock-file-like manifest (cf. dvc.lock): per artifact what it is and everything that made it."""
    now = now or dt.datetime.now(dt.timezone.utc)
    entries = {}
    for art in artifacts:
        producer, lin, entry = found[art.path]
        data = producer.data
        lineage_precisions = sorted({p for r in lin.records for p in record_precisions(r.data)})
        entries[art.name] = {
            "path": art.path,
            "sha256": entry["sha256"],
            "size": entry["bytes"],
            "kind": art.kind,
            "precision": data.get("precision"),
            "lineage_precisions": lineage_precisions,
            "allowed_precisions": list(art.allow_precisions),
            "rule": data.get("rule"),
            "wildcards": data.get("wildcards"),
            "params": data.get("params"),
            "code": data.get("code"),
            "model_set": data.get("model_set"),
            "models": _models(lin),
            "seed": data.get("seed"),
            "machine": data.get("machine"),
            "gpu": data.get("gpu"),
            "started": data.get("started"),
            "wall_seconds": data.get("wall_seconds"),
            "peak_vram_gib": data.get("peak_vram_gib"),
            "inputs": [{"path": i.get("path"), "sha256": i.get("sha256"), "size": i.get("bytes")}
                       for i in data.get("inputs") or []],
            "provenance": {
                "record": producer.path,
                "published_copy": str(Path("provenance") / Path(producer.path).relative_to(
                    "results/provenance")) if producer.path.startswith("results/provenance/") else None,
                "lineage": [r.path for r in lin.records],
            },
        }
    dirty = code is None or code.get("commit") is None or bool(code.get("dirty")) or any(
        (r.data.get("code") or {}).get("dirty") is not False for _, lin, _ in found.values() for r in lin.records
    )
    return {
        "schema": "fourloops.manifest/1",
        "published": now.isoformat(timespec="seconds"),
        "code": {"commit": (code or {}).get("commit"), "dirty": dirty, "allow_dirty": allow_dirty},
        "invocation": invocation,
        "artifacts": entries,
    }


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directories (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    rc = fn(AT_FDCWD, os.fsencode(str(a)), AT_FDCWD, os.fsencode(str(b)), RENAME_EXCHANGE)
    return rc == 0


def publish(
    workdir: str | Path,
    artifacts: list[Artifact],
    manifest: dict,
    *,
    out: str = "results/published",
    records: Iterable[str] = (),
) -> Path:
    """Build the publication in a temporary folder beside `out`, then swap it in; the old one is removed
    only after the swap. A file whose bytes changed since they were judged aborts, leaving `out` as it was."""
    workdir = Path(workdir)
    final = workdir / out
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-new-", dir=final.parent))
    try:
        for art in artifacts:
            dest = tmp / art.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(workdir / art.path, dest)
            want = manifest["artifacts"][art.name]["sha256"]
            if sha256_file(dest) != want:
                raise RuntimeError(f"{art.path} changed while it was being published; nothing was published")
        for rec in sorted(set(records)):
            if rec.startswith("results/provenance/"):
                dest = tmp / "provenance" / Path(rec).relative_to("results/provenance")
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(workdir / rec, dest)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if final.exists():
            if _exchange(tmp, final):
                shutil.rmtree(tmp)          # tmp now holds the old publication
            else:
                old = Path(tempfile.mkdtemp(prefix=f".{final.name}-old-", dir=final.parent))
                os.rmdir(old)
                os.rename(final, old)
                try:
                    os.rename(tmp, final)
                except OSError:
                    os.rename(old, final)
                    raise
                shutil.rmtree(old)
        else:
            os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


# --------------------------------------------------------------------------- the whole gate
@dataclass
class Outcome:
    refusals: list[Refusal]
    manifest: dict | None
    published: Path | None


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
    artifacts, refusals = expand_artifacts(listing, workdir, out)
    index = index_provenance(workdir)
    if callable(stale):
        stale = stale([a.path for a in artifacts if (Path(workdir) / a.path).is_file()])
    more, found = evaluate(workdir, artifacts, index, deny_patterns=deny_patterns, allow_dirty=allow_dirty,
                           code=code, stale=stale)
    refusals += more
    if refusals or not artifacts:
        if not artifacts and not refusals:
            refusals = [Refusal("(publish.artifacts)", 5, "nothing is listed for publication",
                                "list artifacts under publish.artifacts")]
        return Outcome(refusals, None, None)
    manifest = build_manifest(artifacts, found, code=code, allow_dirty=allow_dirty, invocation=invocation)
    records = [r.path for _, lin, _ in found.values() for r in lin.records]
    return Outcome([], manifest, publish(workdir, artifacts, manifest, out=out, records=records))


def report(outcome: Outcome) -> str:
    if outcome.refusals:
        n = len({r.artifact for r in outcome.refusals})
        return (f"publication refused: {n} artifact(s) broke the gate; nothing was published "
                f"(results/published/ is as it was)\n" + format_table(outcome.refusals))
    arts = outcome.manifest["artifacts"]
    lines = [f"published {len(arts)} artifact(s) to {outcome.published} ({MANIFEST}):"]
    for name, a in arts.items():
        lines.append(f"  {name}  {a['kind']}  precision {a['precision']}  sha256 {a['sha256'][:12]}")
    return "\n".join(lines)
