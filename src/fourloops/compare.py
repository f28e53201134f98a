"""Two results trees side by side, artifact by artifact (`fourloops compare A B`, rules/compare.smk).

A tree is a working directory (its results/), a results/ directory, or a listing (`fourloops compare --list DIR`:
each file's sha256 and size, and a JSON, JSON-lines or CSV artifact's digest with its measurement fields out; no
content). A tree's own working directory reads as WORKDIR in its text (records name absolute paths). Each artifact, a file under results/ by its path there, gets one verdict:
`equal` (the same bytes, or the same content once the measurement fields are out), `close` (numbers differ within its
kind's tolerance), `different` (beyond it, unreadable, or only a listing's hash to go by) or `missing` (in one tree
only). What counts as a measurement and each kind's tolerance are config/compare.yaml's, declared nowhere else.
"""

from __future__ import annotations

import dataclasses
import filecmp
import fnmatch
import json
import math
import re
from pathlib import Path
from typing import Any, Callable, Iterable

from fourloops.io import sha256_file

TOLERANCES = Path(__file__).resolve().parents[2] / "config" / "compare.yaml"
TOLERANCES_SCHEMA = TOLERANCES.with_name("compare.schema.yaml")
LISTING_SCHEMA = "fourloops.compare.listing/1"
VERDICTS = ("equal", "close", "different", "missing")
COLUMNS = ("artifact", "kind", "verdict", "figures", "tolerance")
WORKDIR = "<workdir>"  # what a tree's own working directory reads as in its text (records name absolute paths)


class CompareError(ValueError):
    """Input that cannot be compared (a path that is neither a tree nor a listing, a malformed listing): the message
    names the path, what it is and what is allowed."""


# ------------------------------------------------------------------------------------------ tolerances
@dataclasses.dataclass(frozen=True)
class Kind:
    name: str
    patterns: tuple[str, ...]
    fields: dict = dataclasses.field(default_factory=dict)  # field or column -> {max_abs, max_rel, wrap, max_distance}
    pixels: dict | None = None
    tensors: dict | None = None
    numbers: dict | None = None

    def matches(self, rel: str) -> bool:
        return any(_glob(p).fullmatch(rel) for p in self.patterns)


@dataclasses.dataclass(frozen=True)
class Tolerances:
    measurement_fields: tuple[str, ...]
    machine_fields: tuple[str, ...]
    file_entry_fields: tuple[str, ...]
    measurement_artifacts: tuple[str, ...]
    kinds: tuple[Kind, ...]

    @classmethod
    def from_dict(cls, data: dict) -> "Tolerances":
        """From config/compare.yaml's data (checked by its schema: load_tolerances)."""
        return cls(
            measurement_fields=tuple(data["measurement_fields"]),
            machine_fields=tuple(data["machine_fields"]),
            file_entry_fields=tuple(data["file_entry_fields"]),
            measurement_artifacts=tuple(data["measurement_artifacts"]),
            kinds=tuple(Kind(name=name, patterns=tuple(k["patterns"]), fields=dict(k.get("fields") or {}),
                             pixels=k.get("pixels"), tensors=k.get("tensors"), numbers=k.get("numbers"))
                        for name, k in data["kinds"].items()),
        )

    def kind_of(self, rel: str) -> Kind:
        return next((k for k in self.kinds if k.matches(rel)), Kind(name="unmatched", patterns=()))

    def measured(self, rel: str) -> bool:
        return any(_glob(p).fullmatch(rel) for p in self.measurement_artifacts)

    def normalisation(self) -> str:
        """A digest of what a content digest leaves out: a listing's content digests count only under the same."""
        import hashlib

        fields = [self.measurement_fields, self.machine_fields, self.file_entry_fields, self.measurement_artifacts]
        return hashlib.sha256(json.dumps(fields).encode()).hexdigest()

    def dropped(self, across_machines: bool, ignore: tuple[str, ...] = ()) -> Callable[[str], bool]:
        names = self.measurement_fields + (self.machine_fields if across_machines else ()) + tuple(ignore)
        return lambda name: any(fnmatch.fnmatchcase(name, n) for n in names)


def load_tolerances(path: str | Path = TOLERANCES) -> Tolerances:
    """config/compare.yaml, checked against config/compare.schema.yaml (yamlcheck.YamlError naming file and line)."""
    return Tolerances.from_dict(tolerances_data(path))


def tolerances_data(path: str | Path = TOLERANCES) -> dict:
    from fourloops import yamlcheck

    return yamlcheck.load_checked(path, TOLERANCES_SCHEMA, what="compare tolerances file")


_GLOBS: dict[str, re.Pattern] = {}


def _glob(pattern: str) -> re.Pattern:
    """A glob relative to results/ as a regex: `**/` any folders (none included), `**` anything, `*` and `?` within
    one path part."""
    if pattern not in _GLOBS:
        out, i = [], 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
            elif pattern.startswith("**", i):
                out.append(".*")
                i += 2
            elif pattern[i] == "*":
                out.append("[^/]*")
                i += 1
            elif pattern[i] == "?":
                out.append("[^/]")
                i += 1
            else:
                out.append(re.escape(pattern[i]))
                i += 1
        _GLOBS[pattern] = re.compile("".join(out))
    return _GLOBS[pattern]


# ---------------------------------------------------------------------------------------------- trees
@dataclasses.dataclass(frozen=True)
class Tree:
    given: str                 # the path as given, for messages
    results: Path | None       # the results/ directory; None for a listing
    files: dict                # a listing's: path under results/ -> {"sha256", "bytes", content digests}
    normalised_by: str | None = None  # a listing's: Tolerances.normalisation() of its content digests

    @property
    def is_listing(self) -> bool:
        return self.results is None

    def paths(self) -> set[str]:
        if self.is_listing:
            return set(self.files)
        return {p.relative_to(self.results).as_posix() for p in self.results.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(self.results).parts)}

    def workdirs(self) -> tuple[str, ...]:
        """The working directory's absolute spellings (as given, resolved): its records name files under them."""
        if self.is_listing:
            return ()
        spellings = {str(self.results.parent.absolute()), str(self.results.parent.resolve())}
        return tuple(sorted(spellings, key=len, reverse=True))


ALLOWED = ("a working directory holding results/, a results/ directory, or a listing file written by "
           "`fourloops compare --list DIR > listing.json`")


def open_tree(path: str | Path) -> Tree:
    """The tree at `path`: a working directory (its results/), a results/ directory or a listing file."""
    p = Path(path)
    if p.is_dir():
        if (p / "results").is_dir():
            return Tree(str(path), p / "results", {})
        if p.name == "results":
            return Tree(str(path), p, {})
        raise CompareError(f"{path}: a directory with no results/ in it and not itself named results/; allowed: "
                           f"{ALLOWED}")
    if not p.exists():
        raise CompareError(f"{path}: no such file or directory; allowed: {ALLOWED}")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise CompareError(f"{path}: a file that is not a listing (not JSON: {err}); allowed: {ALLOWED}") from None
    if not isinstance(data, dict) or data.get("schema") != LISTING_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise CompareError(f"{path}: JSON whose schema is {found!r}, not {LISTING_SCHEMA!r}; allowed: {ALLOWED}")
    files = data.get("files")
    bad = ([] if isinstance(files, dict) else ["files"]) or [
        k for k, v in files.items()
        if not (isinstance(v, dict) and isinstance(v.get("sha256"), str) and len(v["sha256"]) == 64
                and isinstance(v.get("bytes"), int))]
    if bad:
        raise CompareError(f"{path}: listing entry {bad[0]!r} is not {{sha256: 64 hex digits, bytes: an integer}}; "
                           f"allowed: {ALLOWED}")
    return Tree(str(path), None, files, data.get("normalised_by"))


def listing(path: str | Path, tolerances: Tolerances | None = None) -> dict:
    """The listing of a tree (`fourloops compare --list`): every file under results/ (hidden ones, a killed job's
    temporaries, left out) by its path there, with its sha256 and size, and for a JSON, JSON-lines or CSV artifact
    the digests of its content once the measurement fields are out (on one machine kind, and across machine kinds):
    a record whose bytes differ only in its timings still compares equal from a listing."""
    tree = open_tree(path)
    if tree.is_listing:
        return {"schema": LISTING_SCHEMA, "normalised_by": tree.normalised_by, "files": dict(sorted(tree.files.items()))}
    tol = tolerances or load_tolerances()
    files = {}
    for rel in sorted(tree.paths()):
        files[rel] = _entry(tree.results / rel)
        for across, key in CONTENT_KEYS.items():
            if (digest := _content_digest(tree, rel, tol, across)) is not None:
                files[rel][key] = digest
    return {"schema": LISTING_SCHEMA, "normalised_by": tol.normalisation(), "files": files}


CONTENT_KEYS = {False: "content_sha256", True: "content_sha256_across_machines"}


def _content_digest(tree: Tree, rel: str, tol: Tolerances, across_machines: bool) -> str | None:
    """sha256 of a JSON, JSON-lines or CSV artifact of a directory tree as it is compared once its measurement fields
    (and across machines, its machine fields) are out; None for any other file, or one that does not parse."""
    import hashlib

    suffix = rel.rsplit(".", 1)[-1]
    if suffix not in ("json", "jsonl", "csv") or tree.is_listing:
        return None
    subs = tree.workdirs()
    ctx = _Context(dropped=tol.dropped(across_machines), entry_fields=set(tol.file_entry_fields), subs=(subs, subs),
                   measured=tol.measured(rel))
    path = tree.results / rel
    try:
        if suffix == "csv":
            import pandas as pd

            table = pd.read_csv(path)
            keep = [c for c in table.columns if not ctx.dropped(str(c)) and not (
                ctx.measured and pd.api.types.is_numeric_dtype(table[c]) and not pd.api.types.is_bool_dtype(table[c]))]
            table = table[keep].apply(lambda col: col.map(lambda v: _text(v, subs) if isinstance(v, str) else v))
            text = table.to_csv(index=False)
        else:
            content = _prepared(_read_json(path, "", lines=suffix == "jsonl"), ctx, subs, {})
            text = json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=True)
    except (_Different, OSError, UnicodeDecodeError, ValueError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def tree_state(path: str | Path) -> str:
    """A digest of what a tree holds now, from each file's path, size and mtime (a listing: its bytes), without
    reading the files: a job that compares against the tree is stale when it changes."""
    import hashlib

    tree = open_tree(path)
    digest = hashlib.sha256()
    if tree.is_listing:
        digest.update(Path(path).read_bytes())
    for rel in sorted(tree.paths()) if not tree.is_listing else ():
        st = (tree.results / rel).stat()
        digest.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _entry(path: Path) -> dict:
    return {"sha256": sha256_file(path), "bytes": path.stat().st_size}


# ---------------------------------------------------------------------------------------------- verdicts
@dataclasses.dataclass(frozen=True)
class Row:
    artifact: str   # results/<path>
    kind: str
    verdict: str    # one of VERDICTS
    figures: str
    tolerance: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


class _Different(Exception):
    """Beyond tolerance or not comparable; the message says where and why."""


def compare_trees(a: Tree | str | Path, b: Tree | str | Path, tolerances: Tolerances | None = None, *,
                  across_machines: bool = False, ignore: Iterable[str] = (), include: Iterable[str] = ("**",),
                  exclude: Iterable[str] = ()) -> list[Row]:
    """One row per artifact of either tree (by path under results/, sorted) that an `include` glob matches and no
    `exclude` glob does; `ignore`: field names left out besides the declared ones, for this comparison only."""
    a = a if isinstance(a, Tree) else open_tree(a)
    b = b if isinstance(b, Tree) else open_tree(b)
    tol = tolerances or load_tolerances()
    keep, skip = [_glob(p) for p in include], [_glob(p) for p in exclude]
    in_a, in_b = a.paths(), b.paths()
    rows = []
    for rel in sorted(in_a | in_b):
        if not any(g.fullmatch(rel) for g in keep) or any(g.fullmatch(rel) for g in skip):
            continue
        kind = tol.kind_of(rel)
        if rel not in in_b or rel not in in_a:
            side, other = ("A", "B") if rel in in_a else ("B", "A")
            rows.append(Row(f"results/{rel}", kind.name, "missing", f"only in {side} ({other} lacks it)", ""))
            continue
        rows.append(compare_artifact(rel, a, b, tol, across_machines=across_machines, ignore=tuple(ignore)))
    return rows


def compare_artifact(rel: str, a: Tree, b: Tree, tol: Tolerances, *, across_machines: bool = False,
                     ignore: tuple[str, ...] = ()) -> Row:
    """The verdict on the file at `rel` (under results/) of both trees."""
    kind = tol.kind_of(rel)
    row = lambda verdict, figures, tolerance="": Row(f"results/{rel}", kind.name, verdict, figures, tolerance)  # noqa: E731
    if a.is_listing or b.is_listing:
        ea = a.files[rel] if a.is_listing else _entry(a.results / rel)
        eb = b.files[rel] if b.is_listing else _entry(b.results / rel)
        if ea["sha256"] == eb["sha256"]:
            return row("equal", "same sha256")
        key, norm = CONTENT_KEYS[across_machines], tol.normalisation()
        ca, cb = ((t.files[rel].get(key) if t.normalised_by == norm else None) if t.is_listing
                  else _content_digest(t, rel, tol, across_machines) for t in (a, b))
        if ca is not None and ca == cb and not ignore:
            return row("equal", "same content once the measurement fields are out (the listing's content digest)")
        which = " and ".join(s for s, t in (("A", a), ("B", b)) if t.is_listing)
        stale = [s for s, t in (("A", a), ("B", b)) if t.is_listing and t.normalised_by != norm]
        note = f"; {' and '.join(stale)} listed under other measurement fields" if stale else ""
        return row("different", f"sha256 differs ({ea['bytes']} vs {eb['bytes']} bytes); {which} a listing: hashes "
                                f"only, no content to hold to a tolerance{note}", "byte for byte")
    pa, pb = a.results / rel, b.results / rel
    if filecmp.cmp(pa, pb, shallow=False):
        return row("equal", "same bytes")
    compare = _comparator(rel, kind, tol)
    if compare is None:
        return row("different", f"bytes differ ({pa.stat().st_size} vs {pb.stat().st_size} bytes)", "byte for byte")
    ctx = _Context(dropped=tol.dropped(across_machines, ignore), entry_fields=set(tol.file_entry_fields),
                   subs=(a.workdirs(), b.workdirs()), measured=tol.measured(rel))
    try:
        verdict, figures, tolerance = compare(pa, pb, kind, ctx)
    except _Different as why:
        return row("different", str(why), _tolerance_text(kind, ctx, rel))
    return row(verdict, figures, tolerance)


def exit_status(rows: Iterable[Row]) -> int:
    """0 when nothing is different or missing, else 1."""
    return 1 if any(r.verdict in ("different", "missing") for r in rows) else 0


def counts(rows: Iterable[Row]) -> dict:
    rows = list(rows)
    return {v: sum(r.verdict == v for r in rows) for v in VERDICTS}


def markdown(rows: list[Row], a: str, b: str) -> str:
    """The table as a Markdown page: which trees, the counts, one row per artifact."""
    n = counts(rows)
    cell = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["# fourloops compare", "", f"- A: `{a}`", f"- B: `{b}`", "",
             ", ".join(f"{n[v]} {v}" for v in VERDICTS), "", "| " + " | ".join(COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(getattr(r, c)) for c in COLUMNS) + " |" for r in rows]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------- comparators
@dataclasses.dataclass
class _Context:
    dropped: Callable[[str], bool]      # a measurement field (or a machine field, across machines)
    entry_fields: set                   # a results/ file entry's digest fields
    subs: tuple                         # each tree's working-directory spellings
    measured: bool                      # a measurement artifact: its numbers are left out


def _comparator(rel: str, kind: Kind, tol: Tolerances):
    suffix = rel.rsplit(".", 1)[-1] if "." in rel.rsplit("/", 1)[-1] else ""
    if suffix in ("json", "jsonl"):  # read whatever the kind declares: the measurement fields are left out of all
        return _json_lines if suffix == "jsonl" else _json
    if suffix == "csv":
        return _csv
    if tol.measured(rel) and suffix == "html":
        return _page
    return {"png": _image if kind.pixels else None, "safetensors": _tensors if kind.tensors else None,
            "html": _page if kind.numbers else None}.get(suffix)


def _tolerance_text(kind: Kind, ctx: _Context, rel: str) -> str:
    if ctx.measured:
        return "numbers are measurements: left out"
    if rel.endswith(".png") and kind.pixels:
        return f"max |Δpixel| ≤ {_num(kind.pixels['max_abs'])}, mean ≤ {_num(kind.pixels['mean_abs'])}"
    if rel.endswith(".safetensors") and kind.tensors:
        return f"same names and shapes, max |Δ| ≤ {_num(kind.tensors['max_abs'])}"
    if rel.endswith(".html") and kind.numbers:
        return f"same text, numbers {_spec_text(kind.numbers)}"
    return ("; ".join(f"{name} {_spec_text(spec)}" for name, spec in kind.fields.items())
            or "equal once the measurement fields are out")


def _num(x: float) -> str:
    return f"{x:.4g}"


def _spec_text(spec: dict) -> str:
    if "max_distance" in spec:
        return f"distance ≤ {_num(spec['max_distance'])}"
    parts = [f"|Δ| ≤ {_num(spec['max_abs'])}"] if "max_abs" in spec else []
    parts += [f"rel ≤ {_num(spec['max_rel'])}"] if "max_rel" in spec else []
    return " or ".join(parts or ["|Δ| = 0"]) + (f" (mod {_num(spec['wrap'])})" if "wrap" in spec else "")


def _delta(a: float, b: float, spec: dict) -> tuple[float, bool]:
    """|a - b| (modulo the spec's wrap) and whether it is within the spec."""
    if math.isnan(a) or math.isnan(b):
        return (0.0, True) if math.isnan(a) and math.isnan(b) else (math.inf, False)
    if a == b:
        return 0.0, True
    d = abs(a - b)
    if "wrap" in spec:
        d = d % spec["wrap"]
        d = min(d, spec["wrap"] - d)
    within = d <= spec.get("max_abs", 0.0) or d <= spec.get("max_rel", 0.0) * max(abs(a), abs(b))
    return d, within


class _Numbers:
    """The worst difference seen per declared field, for the figures and the tolerance applied."""

    def __init__(self, fields: dict):
        self.fields = fields
        self.worst: dict[str, float] = {}

    def spec(self, path: tuple) -> tuple[str, dict] | tuple[None, None]:
        for part in reversed(path):
            if isinstance(part, str) and part in self.fields:
                return part, self.fields[part]
        return None, None

    def number(self, a: float, b: float, path: tuple) -> None:
        a, b = float(a), float(b)
        if a == b or (math.isnan(a) and math.isnan(b)):
            return
        name, spec = self.spec(path)
        if spec is None or "max_distance" in spec:
            raise _Different(f"{_where(path)}: {a:g} vs {b:g} (no tolerance declared for it: equal required)")
        d, within = _delta(a, b, spec)
        if not within:
            raise _Different(f"{_where(path)}: {a:g} vs {b:g}, |Δ| {d:.4g} beyond {name} {_spec_text(spec)}")
        self.worst[name] = max(self.worst.get(name, 0.0), d)

    def points(self, a, b, path: tuple, name: str, spec: dict) -> None:
        import numpy as np

        try:
            pa, pb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        except (TypeError, ValueError):
            raise _Different(f"{_where(path)}: not [x, y] points on both sides") from None
        if pa.shape != pb.shape or pa.ndim == 0:
            raise _Different(f"{_where(path)}: points of shape {pa.shape} vs {pb.shape}")
        pa, pb = pa.reshape(-1, pa.shape[-1]), pb.reshape(-1, pb.shape[-1])
        both_nan = np.isnan(pa).all(axis=1) & np.isnan(pb).all(axis=1)
        dist = np.where(both_nan, 0.0, np.linalg.norm(pa - pb, axis=1))
        worst = float(np.nanmax(np.where(np.isnan(dist), np.inf, dist))) if dist.size else 0.0
        if worst > spec["max_distance"]:
            i = int(np.argmax(np.where(np.isnan(dist), np.inf, dist)))
            raise _Different(f"{_where(path + (i,))}: point moved {worst:.4g} beyond {name} {_spec_text(spec)}")
        if worst > 0:
            self.worst[name] = max(self.worst.get(name, 0.0), worst)

    def verdict(self, left_out: set) -> tuple[str, str, str]:
        if not self.worst:
            note = (f" once the measurement fields are out (they differ in {_names(left_out)})" if left_out else
                    " (the bytes differ in layout only)")
            return "equal", f"same content{note}", ""
        figures = "; ".join(f"{name} max {'distance' if 'max_distance' in self.fields[name] else '|Δ|'} {d:.3g}"
                            for name, d in sorted(self.worst.items()))
        tolerance = "; ".join(f"{name} {_spec_text(self.fields[name])}" for name in sorted(self.worst))
        return "close", figures, tolerance


def _names(names: set, most: int = 4) -> str:
    shown = sorted(names)
    return ", ".join(shown[:most]) + (f", +{len(shown) - most} more" if len(shown) > most else "")


def _where(path: tuple) -> str:
    return "/".join(str(p) for p in path) or "(top)"


def _text(value: str, subs: tuple[str, ...]) -> str:
    for prefix in subs:
        value = value.replace(prefix, WORKDIR)
    return value


def _prepared(obj: Any, ctx: _Context, subs: tuple[str, ...], out: dict, path: tuple = ()) -> Any:
    """`obj` without its measurement fields (put in `out` by their path), a results/ file entry's digest fields, and
    with the tree's working directory spelled WORKDIR; a measurement artifact's numbers become None."""
    if isinstance(obj, dict):
        named = obj.get("path")
        entry = isinstance(named, str) and _text(named, subs).removeprefix(WORKDIR + "/").startswith("results/")
        kept = {}
        for k, v in obj.items():
            if ctx.dropped(k):
                out[path + (k,)] = v
            elif not (entry and k in ctx.entry_fields):
                kept[k] = _prepared(v, ctx, subs, out, path + (k,))
        return kept
    if isinstance(obj, list):
        return [_prepared(v, ctx, subs, out, path + (i,)) for i, v in enumerate(obj)]
    if isinstance(obj, str):
        return _text(obj, subs)
    if ctx.measured and _is_number(obj):
        return None
    return obj


def _left_out(a: dict, b: dict) -> set:
    """The names of the measurement fields whose values differ between the sides (or that one side lacks)."""
    return {path[-1] for path in set(a) | set(b) if path not in a or path not in b or a[path] != b[path]}


def _walk(a: Any, b: Any, path: tuple, numbers: _Numbers) -> None:
    name, spec = numbers.spec(path[-1:]) if path and isinstance(path[-1], str) else (None, None)
    if spec is not None and "max_distance" in spec and isinstance(a, list) and isinstance(b, list) and a != b:
        return numbers.points(a, b, path, name, spec)
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            raise _Different(f"keys differ at {_where(path)}: only in A: {sorted(set(a) - set(b)) or '-'}; only in "
                             f"B: {sorted(set(b) - set(a)) or '-'}")
        for k in a:
            _walk(a[k], b[k], path + (k,), numbers)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            raise _Different(f"{_where(path)}: {len(a)} items vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _walk(x, y, path + (i,), numbers)
    elif _is_number(a) and _is_number(b):
        numbers.number(a, b, path)
    elif a != b:
        raise _Different(f"{_where(path)}: {_short(a)} vs {_short(b)}")


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _short(x: Any, most: int = 60) -> str:
    text = json.dumps(x) if not isinstance(x, str) else repr(x)
    return text if len(text) <= most else text[:most - 3] + "..."


def _read_json(path: Path, side: str, lines: bool = False) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
        if not lines:
            return json.loads(text)
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise _Different(f"{side}: not {'JSON lines' if lines else 'JSON'} ({err})") from None


def _json(pa: Path, pb: Path, kind: Kind, ctx: _Context, lines: bool = False) -> tuple[str, str, str]:
    out_a, out_b = {}, {}
    a = _prepared(_read_json(pa, "A", lines), ctx, ctx.subs[0], out_a)
    b = _prepared(_read_json(pb, "B", lines), ctx, ctx.subs[1], out_b)
    numbers = _Numbers(kind.fields)
    _walk(a, b, (), numbers)
    verdict, figures, tolerance = numbers.verdict(_left_out(out_a, out_b))
    if ctx.measured:
        figures += "; numbers left out (a measurement)"
    return verdict, figures, tolerance


def _json_lines(pa: Path, pb: Path, kind: Kind, ctx: _Context) -> tuple[str, str, str]:
    return _json(pa, pb, kind, ctx, lines=True)


def _csv(pa: Path, pb: Path, kind: Kind, ctx: _Context) -> tuple[str, str, str]:
    import numpy as np
    import pandas as pd

    tables = []
    for side, path in (("A", pa), ("B", pb)):
        try:
            tables.append(pd.read_csv(path))
        except (OSError, UnicodeDecodeError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
            raise _Different(f"{side}: not a CSV table ({str(err).strip()})") from None
    ta, tb = tables
    if list(ta.columns) != list(tb.columns):
        raise _Different(f"columns differ: only in A: {[c for c in ta.columns if c not in tb.columns] or '-'}; only "
                         f"in B: {[c for c in tb.columns if c not in ta.columns] or '-'}"
                         + ("" if set(ta.columns) != set(tb.columns) else " (the same columns, in another order)"))
    if len(ta) != len(tb):
        raise _Different(f"{len(ta)} rows vs {len(tb)}")
    numbers, left_out = _Numbers(kind.fields), set()
    for col in ta.columns:
        if ctx.dropped(str(col)):
            if not ta[col].equals(tb[col]):
                left_out.add(str(col))
            continue
        x, y = ta[col], tb[col]
        numeric = all(pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s) for s in (x, y))
        if numeric and ctx.measured:
            continue
        if numeric:
            xa, ya = x.to_numpy(dtype=float), y.to_numpy(dtype=float)
            for i in np.flatnonzero(~((xa == ya) | (np.isnan(xa) & np.isnan(ya)))):
                numbers.number(xa[i], ya[i], (f"row {i}", str(col)))
            continue
        xs = [_text(str(v), ctx.subs[0]) for v in x.tolist()]
        ys = [_text(str(v), ctx.subs[1]) for v in y.tolist()]
        for i, (u, v) in enumerate(zip(xs, ys)):
            if u != v:
                raise _Different(f"row {i}, column {col}: {_short(u)} vs {_short(v)}")
    verdict, figures, tolerance = numbers.verdict(left_out)
    if ctx.measured:
        figures += "; numeric columns left out (a measurement)"
    return verdict, figures, tolerance


def _image(pa: Path, pb: Path, kind: Kind, ctx: _Context) -> tuple[str, str, str]:
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    images = []
    for side, path in (("A", pa), ("B", pb)):
        try:
            with Image.open(path) as im:
                im.load()
                images.append((im.mode, im.size, np.asarray(im).astype(np.int16)))
        except (OSError, UnidentifiedImageError) as err:
            raise _Different(f"{side}: not an image ({err})") from None
    (ma, sa, xa), (mb, sb, xb) = images
    if (ma, sa) != (mb, sb):
        raise _Different(f"{ma} {sa[0]}x{sa[1]} vs {mb} {sb[0]}x{sb[1]}")
    diff = np.abs(xa - xb)
    worst, mean = int(diff.max()) if diff.size else 0, float(diff.mean()) if diff.size else 0.0
    figures = f"max |Δpixel| {worst}, mean {mean:.3g}"
    tolerance = _tolerance_text(kind, ctx, "x.png")
    if worst == 0:
        return "equal", "same pixels (the files' bytes differ)", ""
    if worst > kind.pixels["max_abs"] or mean > kind.pixels["mean_abs"]:
        raise _Different(figures)
    return "close", figures, tolerance


def _tensors(pa: Path, pb: Path, kind: Kind, ctx: _Context) -> tuple[str, str, str]:
    import torch
    from safetensors import SafetensorError, safe_open

    opened = []
    for side, path in (("A", pa), ("B", pb)):
        try:
            fh = safe_open(str(path), framework="pt")
            opened.append((fh, {k: fh.get_slice(k) for k in fh.keys()}))
        except (OSError, SafetensorError, ValueError) as err:
            raise _Different(f"{side}: not a safetensors file ({err})") from None
    (fa, ta), (fb, tb) = opened
    if set(ta) != set(tb):
        raise _Different(f"tensor names differ: only in A: {sorted(set(ta) - set(tb))[:3] or '-'}; only in B: "
                         f"{sorted(set(tb) - set(ta))[:3] or '-'}")
    for name in sorted(ta):
        shape_a, shape_b = list(ta[name].get_shape()), list(tb[name].get_shape())
        dtype_a, dtype_b = ta[name].get_dtype(), tb[name].get_dtype()
        if (shape_a, dtype_a) != (shape_b, dtype_b):
            raise _Different(f"tensor {name}: {dtype_a}{shape_a} vs {dtype_b}{shape_b}")
    meta = [{k: _maybe_json(v) for k, v in (f.metadata() or {}).items()} for f in (fa, fb)]
    _walk(_prepared(meta[0], ctx, ctx.subs[0], {}), _prepared(meta[1], ctx, ctx.subs[1], {}), ("metadata",),
          _Numbers({}))
    worst = 0.0
    for name in sorted(ta):
        x, y = fa.get_tensor(name).double(), fb.get_tensor(name).double()
        nan = torch.isnan(x) & torch.isnan(y)
        if bool((torch.isnan(x) ^ torch.isnan(y)).any()):
            raise _Different(f"tensor {name}: NaN on one side only")
        d = torch.where(nan, torch.zeros_like(x), (x - y).abs())
        worst = max(worst, float(d.max()) if d.numel() else 0.0)
    figures = f"max |Δ| {worst:.3g} over {len(ta)} tensors"
    if worst == 0:
        return "equal", f"same tensors and metadata ({len(ta)} tensors; the files' bytes differ)", ""
    if worst > kind.tensors["max_abs"]:
        raise _Different(figures)
    return "close", figures, _tolerance_text(kind, ctx, "x.safetensors")


def _maybe_json(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _page(pa: Path, pb: Path, kind: Kind, ctx: _Context) -> tuple[str, str, str]:
    texts = []
    for side, path, subs in (("A", pa, ctx.subs[0]), ("B", pb, ctx.subs[1])):
        try:
            texts.append(_text(path.read_text(encoding="utf-8"), subs))
        except (OSError, UnicodeDecodeError) as err:
            raise _Different(f"{side}: not text ({err})") from None
    words = [_NUMBER.split(t) for t in texts]
    if words[0] != words[1]:
        i = next(i for i, (u, v) in enumerate(zip(*words)) if u != v) if len(words[0]) == len(words[1]) else None
        where = f": {_short(words[0][i])} vs {_short(words[1][i])}" if i is not None else ""
        raise _Different(f"the text differs besides its numbers{where}")
    if ctx.measured:
        return "equal", "same text; numbers left out (a measurement)", ""
    numbers = _Numbers({"numbers": kind.numbers})
    for i, (x, y) in enumerate(zip(*(_NUMBER.findall(t) for t in texts))):
        if x != y:
            numbers.number(float(x), float(y), (f"number {i}", "numbers"))
    return numbers.verdict(set())
