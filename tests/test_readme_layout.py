"""docs/layout.md (the README's "Layout" points there) matches the tree: every module, stage, rule file, profile,
executor module and bench script it lists exists, none that exists is left out, and its layers are the ones
tests/test_layers.py enforces."""

from __future__ import annotations

import re

import pytest

from conftest import REPO
from test_layers import LAYERS

LAYOUT = (REPO / "docs" / "layout.md").read_text()
BLOCK = LAYOUT.split("```\n", 2)[1]


def _entries() -> dict[str, str]:
    """Each entry of the Layout block: its head (the names before a run of spaces) -> its text, continuations
    (lines indented past the heads) included."""
    out, head = {}, None
    for line in BLOCK.splitlines():
        if re.match(r" {0,2}\S", line):
            head = re.split(r" {2,}", line.strip(), maxsplit=1)[0]
            out[head] = line.strip()[len(head):].strip()
        elif head is not None:
            out[head] += " " + line.strip()
    return out


def _names(text: str) -> set[str]:
    """The comma-separated names of a list, its parentheticals and backquotes left out."""
    text = re.sub(r"\([^)]*\)", "", text)
    return {n.strip(" .;`\n") for n in text.split(",") if n.strip(" .;`\n")}


def _after(text: str, marker: str, until: str | None = None) -> set[str]:
    assert marker in text, f"docs/layout.md: {marker!r} not found in {text!r}"
    part = text.split(marker, 1)[1]
    return _names(part.split(until, 1)[0] if until else part)


ENTRIES = _entries()


def _stems(folder: str, pattern: str) -> set[str]:
    return {p.name.split(".")[0] for p in (REPO / folder).glob(pattern)} - {"__init__"}


def test_the_layout_names_every_fourloops_module_once_and_only_those():
    top = {p.stem for p in (REPO / "src/fourloops").glob("*.py")} - {"__init__"}
    top |= {p.name for p in (REPO / "src/fourloops").iterdir() if (p / "__init__.py").exists()}
    heads = list(ENTRIES)  # the module heads are those between "src/fourloops/" and the next "src/" entry
    under = heads[heads.index("src/fourloops/") + 1:]
    under = under[:next(i for i, h in enumerate(under) if h.startswith("src/"))]
    listed = [n.removesuffix(".py").removesuffix("/") for head in under for n in _names(head)]
    repeated = sorted({n for n in listed if listed.count(n) > 1})
    assert not repeated, f"docs/layout.md lists {repeated} more than once"
    assert set(listed) - top == set(), f"docs/layout.md lists {sorted(set(listed) - top)}: no such module in src/fourloops"
    assert top - set(listed) == set(), f"docs/layout.md omits {sorted(top - set(listed))} (src/fourloops)"


@pytest.mark.parametrize("head, marker, until, folder, pattern, besides", [
    ("stages/", "one module per stage:", None, "src/fourloops/stages", "*.py", set()),
    ("rule_functions/", "(config, wildcards):", None, "src/fourloops/rule_functions", "*.py", set()),
    ("rules/<stage>.smk", "`lineage=LINEAGE`:", None, "rules", "*.smk", {"common", "hooks"}),
    ("src/snakemake_executor_plugin_runpod/", "the RunPod executor:", None, "src/snakemake_executor_plugin_runpod",
     "*.py", set()),
    ("profiles/", "", None, "profiles", "*/", set()),
    ("bench/", "unit tests):", ";", "bench", "*.py", set()),
])
def test_each_listing_of_the_layout_is_the_folder_it_describes(head, marker, until, folder, pattern, besides):
    listed = _after(ENTRIES[head], marker, until) if marker else _names(ENTRIES[head])
    there = _stems(folder, pattern) - besides
    assert listed == there, (f"docs/layout.md {head}: lists {sorted(listed - there)} that {folder} lacks, "
                             f"omits {sorted(there - listed)}")
    for name in besides:
        assert f"{folder}/{name}{pattern[1:]}" in ENTRIES, f"docs/layout.md has no entry for {folder}/{name}"


def test_the_layers_paragraph_is_the_layers_the_import_test_enforces():
    para = " ".join(LAYOUT.split("Layers point one way, bottom to top:", 1)[1].split(". The domain", 1)[0].split())
    written = [(name.strip(" ;").removeprefix("the "), _names(members))
               for name, members in re.findall(r"([^;()]+?) \(([^)]*)\)", para)]
    enforced = [(name.removeprefix("the "), set(members)) for name, members in LAYERS]
    assert written == enforced, f"docs/layout.md's layers {written} differ from tests/test_layers.py's {enforced}"


def test_every_stage_module_has_its_declaration_and_the_layout_says_which_has_none():
    """declarations/ pairs stages/ module for module; publish alone is declared with no code (it writes no outputs)."""
    assert _stems("src/fourloops/declarations", "*.py") == _stems("src/fourloops/stages", "*.py") | {"publish"}
    assert "one module per module of stages/, and publish" in " ".join(ENTRIES["declarations/"].split())


def test_the_readme_points_to_the_layout():
    assert "`docs/layout.md`" in (REPO / "README.md").read_text().split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_names_every_page_under_docs_and_only_pages_that_exist():
    """The README is short because its details live in docs/: each page it points to exists, and none is orphaned."""
    named = set(re.findall(r"`(docs/[\w-]+\.md)`", (REPO / "README.md").read_text()))
    there = {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}
    assert named == there, f"README names {sorted(named - there)} that docs/ lacks; omits {sorted(there - named)}"


def test_bench_readme_lists_every_bench_script_with_its_question_command_and_record():
    """bench/README.md: one table row per script of bench/ (and only those), each with four cells."""
    text = (REPO / "bench" / "README.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| `") else []
        if cells:
            rows[cells[0].strip("`")] = cells
    there = {p.name for p in (REPO / "bench").iterdir() if p.suffix in (".py", ".sh")}
    assert set(rows) == there, f"bench/README.md lists {sorted(set(rows) - there)} that bench/ lacks, omits {sorted(there - set(rows))}"
    assert all(len(cells) == 4 and all(cells) for cells in rows.values()), [c for c in rows.values() if len(c) != 4]
    for cells in rows.values():  # a record it names is committed
        for path in re.findall(r"`(results/[^`]+)`", cells[3]):
            assert (REPO / "bench" / path).exists(), (cells[0], path)
