"""A reader of the repository can open every source config/models.yaml, machines.yaml and pod_life.yaml cite: a file they
name is a path in the repository, and a source outside it (an RFD, the pod runbook, a script of the seeds) is named
with its date in bench/results/sources.md, which quotes the passages cited, figures included."""

from __future__ import annotations

import re

import pytest
import yaml

from conftest import REPO

CITING = ("config/models.yaml", "config/machines.yaml", "config/pod_life.yaml")
SOURCES = "bench/results/sources.md"
# A file as these files cite one: a path or a bare name with an extension, perhaps with a line (train.py:255).
# A path that starts with "/" (/start.sh) is a place on a pod, not a citation.
FILE = re.compile(r"(?<![\w/.{}-])([\w-]+(?:/[\w.-]+)*\.(?:md|jsonl|json|py|smk|yaml|yml|txt|log|csv|tsv|sh|lock))\b")
RFD = re.compile(r"RFD (\d+(?:/\d+)*)")
SECTION = re.compile(r"§(\d+(?:\.\d+)?)")  # the runbook's: no other source the config files cite has sections


def _sections(text: str) -> dict[str, str]:
    """Each `##`/`###` heading of sources.md -> the text under it (a `##` section includes its `###` ones)."""
    lines = text.splitlines()
    out = {}
    for i, line in enumerate(lines):
        m = re.match(r"(#{2,3}) (.+)", line)
        if not m:
            continue
        depth, body = len(m.group(1)), []
        for later in lines[i + 1:]:
            n = re.match(r"(#{2,3}) ", later)
            if n and len(n.group(1)) <= depth:
                break
            body.append(later)
        out[m.group(2)] = line + "\n" + "\n".join(body)
    return out


def _external(sections: dict[str, str], name: str) -> str | None:
    """The section that names `name` as a source outside the repository, with its date; None if there is none."""
    for heading, body in sections.items():
        if heading.startswith(name + ":") and "not in the repository" in heading and re.search(r"20\d\d-\d\d", heading):
            return body
    return None


def _cited(text: str) -> tuple[set[str], set[str], set[str], bool]:
    files = set(FILE.findall(text))
    rfds = {n for group in RFD.findall(text) for n in group.split("/")}
    return files, rfds, set(SECTION.findall(text)), "runbook" in text


def _source_of(source: str, sections: dict[str, str]) -> tuple[str, str] | None:
    """The record a `source:` string names first, and its text: a bench/results/*.md record, an RFD's section, the
    runbook's. None for a source that names none of these (a bench script's run, checked by its own tests)."""
    found = []
    for m in re.finditer(r"bench/results/[\w.-]+\.md", source):
        found.append((m.start(), m.group(0), (REPO / m.group(0)).read_text()))
    for m in RFD.finditer(source):
        found.append((m.start(), m.group(0), _external(sections, "RFD " + m.group(1).split("/")[0]) or ""))
    for m in re.finditer(r"runbook", source):
        found.append((m.start(), "runbook", _external(sections, "The runbook") or ""))
    return min(found)[1:] if found else None


def _figure_in(value: float, text: str) -> bool:
    """`value` written in `text` as a number (14.76, 6.6 as 6.60, 24.0 as 24 or 24.0)."""
    whole, _, frac = f"{value:g}".partition(".")
    pattern = rf"(?<![\d.]){re.escape(whole)}" + (rf"\.{frac}0*" if frac else r"(?:\.0+)?") + r"(?![\d])"
    return re.search(pattern, text) is not None


@pytest.fixture(scope="module")
def sections():
    return _sections((REPO / SOURCES).read_text())


@pytest.mark.parametrize("citing", CITING)
def test_every_source_a_config_file_cites_is_in_the_repository_or_named_outside_it_with_its_date(citing, sections):
    files, rfds, runbook_sections, runbook = _cited((REPO / citing).read_text())
    assert files and rfds and runbook, f"{citing}: no citations found; the patterns no longer read it"
    missing = [f for f in sorted(files) if not (REPO / f).exists() and _external(sections, f) is None]
    assert not missing, (f"{citing} cites {missing}: neither a path in the repository nor a source named with its "
                         f"date as not in the repository in {SOURCES}")
    missing = [f"RFD {n}" for n in sorted(rfds) if _external(sections, f"RFD {n}") is None]
    assert not missing, f"{citing} cites {missing}, which {SOURCES} does not name with a date"
    if runbook:
        assert _external(sections, "The runbook") is not None, f"{citing} cites the runbook; {SOURCES} does not name it"
    missing = [f"runbook §{n}" for n in sorted(runbook_sections) if not any(h.startswith(f"runbook §{n}:") for h in sections)]
    assert not missing, f"{citing} cites {missing}, which {SOURCES} does not quote"


def test_the_records_cited_do_not_lean_on_a_directory_outside_the_repository():
    for record in (SOURCES, "bench/results/measured-h200-2026-11-30.md"):
        assert "../shared" not in (REPO / record).read_text(), record


def test_every_figure_models_yaml_takes_from_a_written_source_is_written_there(sections):
    facts = yaml.safe_load((REPO / "config" / "models.yaml").read_text())
    rows = [(name, row["gib"], row["source"]) for name, model in facts["models"].items()
            for row in model.get("measured", [])]
    rows += [(name, model["recorded"][key], model["recorded"]["source"]) for name, model in facts["models"].items()
             if "recorded" in model for key in ("vram_gib", "ram_gib")]
    checked, wrong = 0, []
    for name, value, source in rows:
        named = _source_of(source, sections)
        if named is None:
            continue
        checked += 1
        if not _figure_in(float(value), named[1]):
            wrong.append(f"{name}: {value} GiB from {source!r}: not in {named[0]}'s text")
    assert checked >= 25, f"only {checked} rows name a written source; the source patterns no longer read them"
    assert not wrong, "\n".join(wrong)
