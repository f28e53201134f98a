"""No history in code, config or the README: their comments, docstrings and prose say what a thing is and why, never
which run changed what. History lives in CHANGELOG.md, docs/walls-history.md and the records under bench/results/
(bench/results/heldout.yaml names the runs), where run names and commit hashes belong.

Read: every comment and string of the Python under src/, scripts/ and bench/ (its scripts, not bench/gpu_run.sh),
the comments and strings of rules/*.smk and the Snakefile, the comments of config/**/*.yaml, and the whole of
README.md and config/**/*.md. Refused there: an ordinal run name ("the third run", "the twenty-sixth (H100) run",
"the twelfth"), a run number ("run 46", "-run33/heldout"; a record's path is a citation, not a run name) and a
commit hash (7 to 40 hex digits that name a commit of this repository; a sha256, a colour or a model's revision
does not)."""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

from conftest import REPO

SMALL = "first second third fourth fifth sixth seventh eighth ninth".split()
LARGE = ("tenth eleventh twelfth thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth "
         "twentieth thirtieth fortieth fiftieth").split()
COMPOUND = r"(?:twenty|thirty|forty|fifty)-(?:" + "|".join(SMALL) + ")"
ORDINAL = "(?:" + "|".join(SMALL + LARGE) + "|" + COMPOUND + ")"
HISTORY = [
    ("an ordinal run name", re.compile(
        rf"\bthe\s+{ORDINAL}(?:\s*\([^)]*\))?(?:\s+(?:GPU|H100|H200|whole-DAG|sizing))*\s+runs?\b", re.I)),
    ("an ordinal past the ninth", re.compile(rf"(?<!\ba\s)(?<!\bone\s)\b(?:{'|'.join(LARGE)}|{COMPOUND})\b", re.I)),
    ("a run number", re.compile(r"\bruns?\s+(?:#|no\.\s*)?\d+\b|(?<![\w/.-])-run\d+\b", re.I)),
]
HEX = re.compile(r"(?<![\w/.#:-])[0-9a-f]{7,40}(?![\w-])")


def _python_text(source: str) -> str:
    """A Python file's comments and strings, in order, one space between them (a phrase wrapped over two comment lines
    or two implicitly joined literals reads whole)."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                out.append(tok.string.lstrip("#"))
            elif tok.type == tokenize.STRING:
                out.append(re.sub(r"^[rbufRBUF]*('''|\"\"\"|'|\")|('''|\"\"\"|'|\")$", "", tok.string))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source  # not Python to the tokenizer (a .smk it cannot read): all of it
    return " ".join(out)


def _yaml_comments(source: str) -> str:
    """A YAML file's comments: from a `#` that starts a line or follows a space, outside quotes."""
    out = []
    for line in source.splitlines():
        quote = None
        for i, ch in enumerate(line):
            if quote:
                quote = None if ch == quote else quote
            elif ch in "\"'":
                quote = ch
            elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
                out.append(line[i + 1:])
                break
    return " ".join(out)


def _files() -> list[Path]:
    files = [REPO / "README.md", REPO / "Snakefile"]
    files += sorted((REPO / "bench").glob("*.py"))
    for tree in ("src", "scripts", "rules", "config"):
        files += sorted(p for p in (REPO / tree).rglob("*") if p.is_file() and p.suffix in (".py", ".smk", ".yaml", ".md")
                        and "__pycache__" not in p.parts)
    return [f for f in files if f.exists()]


def _text(path: Path) -> str:
    source = path.read_text(errors="replace")
    if path.suffix == ".md":
        return source
    if path.suffix == ".yaml":
        return _yaml_comments(source)
    return _python_text(source)  # .py, .smk and the Snakefile


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return {str(p.relative_to(REPO)): " ".join(_text(p).split()) for p in _files()}


def test_the_history_check_reads_what_it_should(texts):
    assert {"README.md", "src/fourloops/asks.py", "bench/walls_fit.py", "config/models.yaml",
            "rules/common.smk"} <= set(texts)
    assert not [name for name in texts if name.endswith(".sh")]
    # what it refuses, and what it lets through
    refused = ["the twenty-sixth (H100) run", "the third run", "before the twelfth", "run 46", "(-run33/heldout)",
               "the ninth H200 run"]
    allowed = ["a second run is refused", "the first item", "hailortcli run2",
               "bench/results/gpu-run-h100-2026-12-05-run33/heldout", "the second pass", "a tenth of the spread"]
    assert all(any(rx.search(t) for _, rx in HISTORY) for t in refused)
    assert not [t for t in allowed if any(rx.search(t) for _, rx in HISTORY)]


@pytest.mark.parametrize("what, rx", HISTORY, ids=[w for w, _ in HISTORY])
def test_no_run_is_named_in_code_config_or_the_readme(texts, what, rx):
    found = {name: sorted({m.group(0) for m in rx.finditer(text)}) for name, text in texts.items()}
    found = {name: hits for name, hits in found.items() if hits}
    assert not found, f"{what} (history goes to CHANGELOG.md or docs/walls-history.md): {found}"


def test_no_commit_is_named_in_code_config_or_the_readme(texts):
    candidates: dict[str, set[str]] = {}
    for name, text in texts.items():
        for m in HEX.finditer(text):
            word = m.group(0)
            if re.search(r"[a-f]", word) and re.search(r"\d", word):
                candidates.setdefault(word, set()).add(name)
    if not candidates:
        return
    # a checkout is a git repository (CI's is a clone): a git that cannot read it fails the test, never skips it
    got = subprocess.run(["git", "cat-file", "--batch-check"], input="\n".join(candidates) + "\n",
                         capture_output=True, text=True, cwd=REPO, check=True).stdout.splitlines()
    commits = {word: sorted(candidates[word]) for word, line in zip(candidates, got) if line.split()[1:2] == ["commit"]}
    assert not commits, f"commit hashes (history goes to CHANGELOG.md or bench/results/): {commits}"
