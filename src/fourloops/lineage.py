"""Which library code a stage runs: the `fourloops` modules its module imports, directly or not.

Derived from the source (every `import` statement, at any depth, function bodies included; not
`if TYPE_CHECKING:` blocks, which never run), so a lineage never lists modules by hand: change a module
only the ladder's code imports and exactly the ladder's jobs are stale; change one that no stage imports
and nothing is. A module that decides where and whether a job runs, never what it writes (the stage
declaration, the asks, the preflight, the machines, the busy-card guard), says so with a module-level
`LINEAGE = False`: the walk does not follow it, so tuning a wall rebuilds nothing.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import ast
import functools
import hashlib
import importlib.util
from pathlib import Path

PACKAGE = "fourloops"


def _module_file(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _imports(path: Path, module: str) -> set[str]:
    """Names of the fourloops modules `path` (module `module`) imports."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
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


def _executed(tree: ast.AST):
    """Every node except those under `if TYPE_CHECKING:` (imports for type annotations only)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                todo.extend(child.orelse)
                continue
            todo.append(child)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def follows(path: Path) -> bool:
    """False for a module that declares `LINEAGE = False` at its top level."""
    for node in ast.parse(path.read_bytes(), filename=str(path)).body:
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
        if path is None or (name != module and not follows(path)):
            continue
        seen.add(name)
        parts = name.split(".")
        # a submodule's package __init__ runs first
        for i in range(1, len(parts)):
            todo.append(".".join(parts[:i]))
        todo.extend(_imports(path, name) - seen)
    return tuple(sorted(seen))


@functools.cache
def code_digest(module: str, *extra_files: str) -> str:
    """sha256 over the sources of `module`'s closure (by module name, content) and `extra_files` (content)."""
    h = hashlib.sha256()
    for name in closure(module):
        h.update(name.encode() + b"\0" + hashlib.sha256(_module_file(name).read_bytes()).digest())
    for file in extra_files:
        h.update(b"file\0" + hashlib.sha256(Path(file).read_bytes()).digest())
    return h.hexdigest()[:16]
