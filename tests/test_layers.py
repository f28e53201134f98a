"""Layers point one way: the import graph of src/fourloops (every import statement, at any depth: top level,
function bodies and `if TYPE_CHECKING:` blocks alike) has no cycle, and no module imports a layer above its own."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

from conftest import REPO

SRC = REPO / "src"
PACKAGE = "fourloops"

# Bottom to top. A module named here imports only modules of its own layer or below, and domain modules
# (every module not named: the body, the renderer, the generator, the LoRA, ...); a domain module imports only
# domain modules and the facts; the facts import only facts.
LAYERS = (
    ("facts and YAML checks", {"yamlcheck", "anny_tables", "coco", "backends", "filecheck", "tables", "records",
                               "io"}),
    ("config and machines", {"config", "machines", "card", "model_sets", "names"}),
    ("asks and preflight", {"asks", "batching", "preflight"}),
    ("stage declarations and the jobs' code", {"stage", "stages.*", "declarations.*"}),
    ("the job graph", {"jobgraph", "targets"}),
    ("walls", {"walls"}),
    ("placement and levers", {"slurm", "levers", "placement"}),
    ("the refusal report", {"refusal"}),
    ("the checks before the first job", {"admission"}),
    ("plan and the Snakemake glue", {"plan", "smk", "cli", "pods", "runlock", "lastgood", "checkpoints",
                                     "rule_functions.*"}),
)


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in (root / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """Module -> the fourloops modules it imports (a package's submodule `from pkg import sub` counts as sub)."""
    mods = _modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                for a in node.names:
                    deps.add(f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def layer_of(module: str) -> int | None:
    short = module.removeprefix(PACKAGE + ".")
    for i, (_, members) in enumerate(LAYERS):
        if short in members or any(m.endswith(".*") and short.startswith(m[:-1]) for m in members):
            return i
    return None  # a domain module


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as err:
        return list(err.args[1])
    return None


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import that points up a layer (from the facts into the domain, from the domain above the facts)."""
    out = []
    for module, deps in sorted(graph.items()):
        mine = layer_of(module)
        for dep in sorted(deps):
            theirs = layer_of(dep)
            if theirs is None:
                if mine == 0:
                    out.append(f"{module} ({LAYERS[0][0]}) imports {dep} (the domain)")
                continue
            ceiling = 0 if mine is None else mine
            if theirs > ceiling:
                where = "the domain" if mine is None else LAYERS[mine][0]
                out.append(f"{module} ({where}) imports {dep} ({LAYERS[theirs][0]})")
    return out


def test_the_import_graph_has_no_cycle():
    found = cycle(import_graph())
    assert found is None, "import cycle: " + " -> ".join(found)


def test_no_module_imports_a_layer_above_its_own():
    assert upward(import_graph()) == []


@pytest.mark.parametrize("module,line,problem", [
    ("asks", "from fourloops.stage import stage_for\n", "cycle"),
    ("machines", "def f():\n    from fourloops.slurm import place\n", "cycle"),
    ("body", "def f():\n    from fourloops.preflight import check\n", "upward"),
    ("walls", "def f():\n    from fourloops import refusal\n", "upward"),
    ("anny_tables", "def f():\n    from fourloops import body\n", "upward"),
    # the glue's parts: the job graph knows nothing of where jobs run, placement nothing of the onstart checks
    ("jobgraph", "def f():\n    from fourloops import placement\n", "upward"),
    ("placement", "def f():\n    from fourloops.admission import Admission\n", "upward"),
    ("admission", "def f():\n    from fourloops import smk\n", "cycle"),
])
def test_a_wrong_way_import_is_caught(tmp_path, module, line, problem):
    """The checks read the source: an import added anywhere in a module (a function body too) is seen."""
    import shutil

    copy = tmp_path / "src"
    shutil.copytree(SRC / PACKAGE, copy / PACKAGE)
    path = copy / PACKAGE / f"{module}.py"
    path.write_text(path.read_text() + "\n\n" + line)
    graph = import_graph(copy)
    if problem == "cycle":
        assert cycle(graph) is not None
    assert any(x.startswith(f"{PACKAGE}.{module} ") for x in upward(graph))
