"""docs/layout.md (the README's "More" points there) matches the tree: every module, stage, rule file, profile,
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
    assert "`docs/layout.md`" in (REPO / "README.md").read_text().split("\n## More\n", 1)[1].split("\n## ", 1)[0]


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


# ------------------------------------------- the README's "What it costs, measured": every figure from its record
RESULTS = REPO / "bench" / "results"


def _summary(path) -> str:
    return path.read_text().split("## Summary\n", 1)[1]


def _one(pattern: str, text: str, flags: int = re.M) -> tuple[str, ...]:
    found = re.findall(pattern, text, flags)
    assert len(found) == 1, (pattern, found)
    return found[0] if isinstance(found[0], tuple) else (found[0],)


def _smoke_ladder(record) -> str:
    text = record.read_text()
    (wall,), (jobs,) = _one(r"^smoke ladder wall time: (\S+) s", text), _one(r"^all jobs\s+(\d+)\s", text)
    return f"{wall} s for {jobs} jobs"


def _suite(record) -> str:
    passed, seconds = _one(r"^# UTC, \d+ s\. pytest: (\d+) passed, \d+ skipped in (\S+) s\.", record.read_text())
    return f"{float(seconds):.0f} s, {passed} passed"


def _anny(record) -> str:
    seconds, mb = _one(r"^build 1: (\S+) s for the process .*?, cache (\d+) MB;", record.read_text())
    return f"{seconds} s, {mb} MB of cache"


def _dryrun(record) -> str:
    rows = re.findall(r"^\s+(\d+) cold\s+\S+\s+\S+\s+\S+\s+(\S+)x\s", record.read_text(), re.M)
    ratios = sorted(rows, key=lambda r: float(r[1]))
    jobs = sorted(int(j) for j, _ in rows)
    return (f"`snakemake -n` {ratios[0][1]}x-{ratios[-1][1]}x of bare Snakemake, {jobs[0]} to {jobs[-1]} jobs")


def _whole_dag(run) -> str:
    steps = re.findall(r"^(\d+) of (\d+) steps \(100%\) done$", (run / "cap24-admitted.log").read_text(), re.M)
    n, lo, hi = _one(r"^- DAG GPU jobs: (\d+), asked/NVML (\S+)-(\S+), below 1: 0$", _summary(run / "table.md"))
    (admits,) = _one(r"^- admitted, failed under the cap \(false admits\): (\d+)$", _summary(run / "cap24.md"))
    assert steps and steps[-1][0] == steps[-1][1]
    return f"{steps[-1][0]} of {steps[-1][1]} steps; {n} GPU jobs asked {lo}-{hi} of the driver; {admits} false admits"


def _forecasts(table) -> str:
    lo, hi, _ = _one(r"^- forecast/actual, forecast from a probe: (\S+)-(\S+) \((\d+) jobs\)", _summary(table))
    within, of = _one(r"^- forecast from a probe within 20% of actual: (\d+) of (\d+) jobs$", _summary(table))
    return f"{within} of {of} jobs within 20% ({lo}-{hi})"


def _walls(table) -> str:
    n, lo, hi, below, over = _one(
        r"^- since the floor, OmniGen2, LoRA and scorer configurations, [^:]*: (\d+), wall ask/NVML - 1 from (\S+) to "
        r"(\S+); below the driver: (\d+); over \+10%: (\d+);", table.read_text())
    return f"{n} asked {lo} to {hi} over the driver; {below} below, {over} over +10%"


# a record (the row's last cell) -> the figure its row gives, made from the record alone
def _pair(record) -> str:
    text = record.read_text()
    files, same, differ = _one(r"^- outputs: (\d+); the same bytes: (\d+); different bytes: (\d+); in one run only: 0$",
                               text)
    (equal,) = _one(r"^- of the \d+ whose bytes differ, by `fourloops compare` \(measurement fields out\): (\d+) equal$",
                    text)
    assert int(same) + int(equal) == int(files) and equal == differ
    return f"{files} of {files} outputs equal ({same} the same bytes, {equal} once their measurement fields are out)"


def _batching(record) -> str:
    text = record.read_text()
    (view,) = _one(r"^\| generate A, s a view \(8 views\) \| \S+ \| \S+ \| (\S+)x \|", text)
    (step,) = _one(r"^\| lora_train, s an optimizer step of 8 samples \(steps 2-10\) \| \S+ \| \S+ \| (\S+)x \|", text)
    (equal,) = _one(r"^Equal: (.*)$", text)
    made = [a for a in equal.split(", ") if a.endswith(("png`", "safetensors`"))]
    return (f"generate A {view}x faster a view at 8 a call; a LoRA step {step}x at 8 samples a forward; "
            f"a second lease: {len(made)} images and tensors the same bytes")


def _bill(path: Path) -> str:
    """The full ladder's pod bill, one item a call (the record beside it, -before) against auto (this one)."""
    def figures(text):
        gpu = int(_one(r"pod GPU seconds (\d+)", text)[0])
        billed, cost = _one(r"^shipped executor +\d+ +(\d+) .*?(\$\d+\.\d\d)", text)
        return gpu, int(billed), cost

    (g0, b0, c0), (g1, b1, c1) = (figures(path.with_name(path.name.replace("-after", "-before")).read_text()),
                                  figures(path.read_text()))
    return f"{g0} -> {g1} GPU s ({g0 / g1:.2f}x); billed {b0} -> {b1} s, {c0} -> {c1}"


COSTS = {
    "bench/results/smoke-ladder-2026-12-05.txt": _smoke_ladder,
    "bench/results/suite-2026-12-08.txt": _suite,
    "bench/results/anny-build-2026-12-05.txt": _anny,
    "bench/results/dryrun-2026-12-05.txt": _dryrun,
    "bench/results/gpu-run-h100-2026-12-06-run46/": _whole_dag,
    "bench/results/gpu-run-h100-2026-12-06-run46/table.md": _forecasts,
    "bench/results/walls-fit-h200-2026-12-01.md": _walls,
    "bench/results/repro-h100-2026-12-07/summary.md": _pair,
    "bench/results/repro-h100-2026-12-07b/summary.md": _pair,
    "bench/results/batching-h100-2026-12-07/summary.md": _batching,
    "bench/results/pod_bill-batching-h100-2026-12-08-after.txt": _bill,
}


def _cost_rows() -> list[list[str]]:
    section = (REPO / "README.md").read_text().split("\n## What it costs, measured\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| what | figure | machine | command | record |"), lines[:1]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[1:]]  # its rule line is "|---"


def test_every_figure_of_the_readmes_costs_table_regenerates_from_its_record():
    rows = _cost_rows()
    assert 5 <= len(rows) <= 11, len(rows)
    for what, figure, machine, command, record in rows:
        path = record.strip("`")
        assert path in COSTS, f"README costs row {what!r}: no regenerator for its record {path} (add one to COSTS)"
        assert (REPO / path).exists(), path
        assert figure == COSTS[path](REPO / path), (what, figure, COSTS[path](REPO / path))
        assert machine and command.startswith("`") and command.endswith("`"), what


def test_the_readme_is_short_and_names_no_run_or_commit():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 150, len(lines)  # tests/test_history.py refuses run names and commit hashes in it


def test_the_measured_summary_gives_the_figures_its_records_give():
    """docs/measured.md's summary (its lines before the first section, at most 15) against the walls table and the
    whole-DAG run's records."""
    text = (REPO / "docs" / "measured.md").read_text()
    summary = text.split("\n## ", 1)[0].split("\n", 2)[2]
    assert len(summary.strip().splitlines()) <= 15
    summary = " ".join(summary.split())
    walls = (RESULTS / "walls-fit-h200-2026-12-01.md").read_text()
    held = re.findall(r"^- held-out configurations \((.+?) run(?:, [^)]*)?\): (\d+),", walls, re.M)
    runs = {re.sub(r" \(extra\)$", "", name) for name, _ in held}
    assert f"{len(runs)} runs" in summary and f"{sum(int(n) for _, n in held)} in all" in summary, (len(runs), held)
    n, lo, hi = _one(r"^- since the floor, OmniGen2, LoRA and scorer configurations, [^:]*: (\d+), wall ask/NVML - 1 "
                     r"from (\S+) to (\S+); below the driver: 0; over \+10%: 0;", walls)
    assert f"{n} OmniGen2, LoRA and scorer configurations were asked {lo} to {hi} of the driver" in summary
    n, lo, hi = _one(r"^- since the floor, detector configurations: (\d+), wall ask/NVML - 1 from (\S+) to (\S+); "
                     r"below the driver: 0;", walls)
    assert f"the detector's {n}, {lo} to {hi} (never below)" in summary
    (n,) = _one(r"^- in-sample records: (\d+), .*; ask below the driver: 0$", walls)
    assert f"every one of the {n} committed GPU records" in summary
    n, lo, hi = _one(r"^- records with a peak RSS: (\d+), RAM ask/peak RSS from (\S+) to (\S+); ask below the peak: 0",
                     walls)
    assert f"all {n} records with a peak RSS (ask/RSS {lo}-{hi})" in summary
    run = RESULTS / "gpu-run-h100-2026-12-06-run46"
    steps, jobs, admits = _whole_dag(run).split("; ")
    assert f"{steps}, its {jobs}" in summary and "no false admit" in summary and admits == "0 false admits"
    within = _forecasts(run / "table.md").split(" within")[0]
    assert f"within 20% for {within}" in summary


def test_the_readmes_other_figures_are_the_configs():
    """The figures the README quotes outside its costs table: the desk's card, the DFC's two walls (RFD 1165) and the
    default profile's card, as config/machines.yaml, config/models.yaml and profiles/default give them."""
    import yaml

    readme = " ".join((REPO / "README.md").read_text().split())
    machines = yaml.safe_load((REPO / "config" / "machines.yaml").read_text())
    dfc = yaml.safe_load((REPO / "config" / "models.yaml").read_text())["models"]["dfc_optimize"]["recorded"]
    profile = yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())
    assert f"RTX 3090 ({machines['desk']['gpu']['vram_gib']:g} GiB)" in readme
    assert f"({dfc['vram_gib']:g} GiB of VRAM, {dfc['ram_gib']:g} GiB of RAM)" in readme
    assert any(f"`{r}`" in readme for r in profile["resources"] if r.startswith("vram_mb=")), profile["resources"]
