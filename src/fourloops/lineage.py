"""Which library code a stage runs: the `fourloops` modules its module imports, directly or not.

Derived from the source (every `import` statement, at any depth, function bodies included; not
`if TYPE_CHECKING:` blocks, which never run), so a lineage never lists modules by hand: change a module
only the ladder's code imports and exactly the ladder's jobs are stale; change one that no stage imports
and nothing is. A module that decides where and whether a job runs, never what it writes (the stage
declaration, the asks, the preflight, the machines, the busy-card guard), says so with a module-level
`LINEAGE = False`: the walk does not follow it, so tuning a wall rebuilds nothing.

What a module imports and whether it is followed are kept by the sha256 of its bytes in
`~/.cache/fourloops/lineage.json`, so a run parses only the modules whose bytes it has not seen.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import ast
import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import tempfile
from pathlib import Path

PACKAGE = "fourloops"
FACTS_CACHE = Path.home() / ".cache" / "fourloops" / "lineage.json"
FACTS_SCHEMA = "fourloops.lineage-facts/1"


@functools.cache
def _module_file(name: str) -> Path | None:
    """The source file of module `name`, found on the import path without importing anything:
    `importlib.util.find_spec("fourloops.fit.x")` would import fourloops.fit (numpy, scipy) to look."""
    parent, _, leaf = name.rpartition(".")
    if not parent:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
    else:
        package = _module_file(parent)
        if package is None or package.name != "__init__.py":
            return None  # `from fourloops.io import write_json`: a name in a module, not a module
        spec = importlib.machinery.PathFinder.find_spec(leaf, [str(package.parent)])
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


@functools.cache
def _sha256(path: Path) -> str:
    """A module's bytes, read once per process."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Facts:
    """(module, sha256 of its bytes) -> its fourloops imports and whether the walk follows it; kept in
    FACTS_CACHE between processes (a cache is only a shortcut: unreadable, it is rebuilt)."""

    def __init__(self, file: Path):
        self.file = file
        self.entries: dict[str, dict] = {}
        self.changed = False
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("schema") == FACTS_SCHEMA and isinstance(data.get("modules"), dict):
            self.entries = data["modules"]

    def of(self, path: Path, module: str) -> tuple[frozenset[str], bool]:
        key = f"{module}:{_sha256(path)}"
        entry = self.entries.get(key)
        if not (isinstance(entry, dict) and isinstance(entry.get("imports"), list)
                and isinstance(entry.get("follows"), bool)):
            tree = ast.parse(path.read_bytes(), filename=str(path))
            entry = {"imports": sorted(_imports(tree, path, module)), "follows": _follows(tree)}
            self.entries[key] = entry
            self.changed = True
        return frozenset(entry["imports"]), entry["follows"]

    def save(self) -> None:
        if not self.changed:
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.file.name}.", dir=self.file.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"schema": FACTS_SCHEMA, "modules": self.entries}, fh)
            os.replace(tmp, self.file)  # atomic: a concurrent run reads the old file or this one
            self.changed = False
        except OSError:
            pass  # a read-only home: every run parses the modules again


@functools.cache
def _facts() -> _Facts:
    return _Facts(FACTS_CACHE)


def _imports(tree: ast.Module, path: Path, module: str) -> set[str]:
    """Names of the fourloops modules `path` (module `module`, parsed: `tree`) imports."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in _executed(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            # `from fourloops import io` imports the module fourloops.io; `from fourloops.io import x` imports fourloops.io
            names = [prefix] + [f"{prefix}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                out.add(name)
    return out


# The fields that hold statements (an import is a statement, so expressions need no walk).
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _executed(tree: ast.AST):
    """Every statement except those under `if TYPE_CHECKING:` (imports for type annotations only)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for block in _BLOCKS:
            for child in getattr(node, block, ()):
                if isinstance(child, ast.If) and _is_type_checking(child.test):
                    todo.extend(child.orelse)
                    continue
                todo.append(child)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _follows(tree: ast.Module) -> bool:
    """False for a module that declares `LINEAGE = False` at its top level."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "LINEAGE" for t in node.targets)
                and isinstance(node.value, ast.Constant) and node.value.value is False):
            return False
    return True


@functools.cache
def closure(module: str) -> tuple[str, ...]:
    """`module` and every fourloops module it imports, transitively (sorted names)."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(name)
        if path is None:
            continue
        imports, follows = _facts().of(path, name)
        if name != module and not follows:
            continue
        seen.add(name)
        parts = name.split(".")
        # a submodule's package __init__ runs first
        for i in range(1, len(parts)):
            todo.append(".".join(parts[:i]))
        todo.extend(imports - seen)
    _facts().save()
    return tuple(sorted(seen))


@functools.cache
def code_digest(module: str, *extra_files: str) -> str:
    """sha256 over the sources of `module`'s closure (by module name, content) and `extra_files` (content)."""
    h = hashlib.sha256()
    for name in closure(module):
        h.update(name.encode() + b"\0" + bytes.fromhex(_sha256(_module_file(name))))
    for file in extra_files:
        h.update(b"file\0" + hashlib.sha256(Path(file).read_bytes()).digest())
    return h.hexdigest()[:16]
