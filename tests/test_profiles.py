"""The documented commands run with their profile's own settings.

Snakemake loads profiles/default as the workflow profile unless --workflow-profile names another, and a workflow
profile overrides a --profile key by key: `--profile profiles/pod` ran pod jobs against the desk's vram_mb=24576.
Each command here is parsed by Snakemake's own argument parser (snakemake.cli.parse_args, as `snakemake` does).
"""

from __future__ import annotations

import re

import pytest
import snakemake.cli
import yaml
from snakemake.cli import parse_args

from conftest import REPO

# Where the repository tells a user how to run a profile: the README and the pages under docs/, each profile's
# header, the executor's docstring and the preflight's message.
DOCS = [REPO / "README.md", *sorted(REPO.glob("docs/*.md")), *sorted(REPO.glob("profiles/*/config.yaml")),
        REPO / "src" / "snakemake_executor_plugin_runpod" / "__init__.py", REPO / "src" / "fourloops" / "preflight.py"]
COMMAND = re.compile(r"(?:snakemake|fourloops plan)\b[^\n`]*?(--(?:workflow-)?profile)[ =](profiles/[\w-]+)")


def documented() -> dict[tuple[str, str], str]:
    found = {}
    for doc in DOCS:
        for m in COMMAND.finditer(doc.read_text()):
            found.setdefault((m.group(1), m.group(2)), f"{doc.relative_to(REPO)}: {m.group(0)}")
    return found


def _args(monkeypatch, *argv: str):
    monkeypatch.chdir(REPO)  # the README's commands run from the repository's root
    # `cores: all` as on a 16-core desk, so a profile's own `cores:` shows even on a 2-core machine
    monkeypatch.setattr(snakemake.cli, "available_cpu_count", lambda: 16)
    return parse_args(["-s", "Snakefile", *argv, "-n"])


def _value(parsed, key: str):
    parser, args = parsed
    value = getattr(args, parser._option_string_actions[f"--{key}"].dest)  # the flag a profile key becomes
    # resources: Resource objects compare by identity, their text (name, value) does not
    return {k: repr(v) for k, v in value.items()} if hasattr(value, "items") else value


def test_every_non_desk_profile_the_docs_name_is_documented():
    # the check below must not pass because the regex found nothing
    assert {p for _, p in documented()} >= {"profiles/pod", "profiles/smoke", "profiles/sizing", "profiles/slurm",
                                            "profiles/sizing-gpu"}


@pytest.mark.parametrize("flag,profile", sorted(documented()))
def test_a_documented_command_runs_with_every_setting_its_profile_makes(monkeypatch, flag, profile):
    where = documented()[(flag, profile)]
    run = _args(monkeypatch, flag, profile)
    alone = _args(monkeypatch, "--workflow-profile", "none", "--profile", profile)  # the profile and nothing else
    keys = yaml.safe_load((REPO / profile / "config.yaml").read_text())
    lost = {k: (_value(run, k), _value(alone, k)) for k in keys if _value(run, k) != _value(alone, k)}
    assert not lost, f"{where}: the run does not get these settings of {profile} (run's, profile's): {lost}"


def test_the_pod_profiles_run_counts_pod_jobs_against_the_pods_card_not_the_desks(monkeypatch):
    (flag, _), = [k for k in documented() if k[1] == "profiles/pod" and "README" in documented()[k]][:1]
    resources = _args(monkeypatch, flag, "profiles/pod")[1].resources
    assert {k: v.raw for k, v in resources.items()} == {"vram_mb": 46000}
    desk = _args(monkeypatch)[1].resources  # a plain desk run keeps the desk's card
    assert {k: v.raw for k, v in desk.items()} == {"vram_mb": 24576}


def test_the_sizing_probe_on_the_desk_keeps_the_desks_card(monkeypatch):
    # profiles/sizing replaces profiles/default, so it declares the desk's card itself
    (flag, _), = [k for k in documented() if k[1] == "profiles/sizing" and "README" in documented()[k]][:1]
    resources = _args(monkeypatch, flag, "profiles/sizing")[1].resources
    assert {k: v.raw for k, v in resources.items()} == {"vram_mb": 24576}
