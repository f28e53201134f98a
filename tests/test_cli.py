"""The `fourloops` command routes each subcommand to its code: each test checks that code's own outcome."""

import json

import pytest

from conftest import REPO
from fourloops import cli, guard


def test_every_subcommand_is_tested_here():
    assert set(cli.SUBCOMMANDS) == {"plan", "guard", "probes", "pods"}


def test_plan_routes_to_the_planner(tmp_path, capsys):
    code = cli.main(["plan", "--profile", str(REPO / "profiles" / "smoke"), "--directory", str(tmp_path),
                     "--json", "results/render/az000.png"])
    out = capsys.readouterr().out
    # Snakemake's logger writes to the stream pytest put in sys.stdout (in a shell it goes to the
    # planner's scratch file): the plan is the JSON document that follows.
    plan = json.loads(out[out.index('{\n "machine"'):])
    assert code == 0 and plan["ok"] is True
    assert {job["rule"] for job in plan["jobs"]} == {"render"}
    assert not (tmp_path / "results").exists()  # a plan writes no outputs


def test_guard_routes_to_the_guard_with_its_exit_status(monkeypatch, capsys):
    monkeypatch.setattr(guard, "read_nvml", lambda: [guard.CardReading(0, "card", 24.0, 20.0, (guard.Holder(7, "other", 19.0),))])
    assert cli.main(["guard", "--limit-gib", "2"]) == guard.EXIT_BUSY
    assert "pid       7" in capsys.readouterr().err
    assert cli.main(["guard", "--device", "2"]) == guard.EXIT_NO_CARD


def test_guard_refuses_a_limit_of_zero(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["guard", "--limit-gib", "0"])
    assert exit_.value.code == 2
    assert "busy-card limit = '0' GiB; allowed: a finite number > 0" in capsys.readouterr().err


def test_probes_routes_to_the_measurements(tmp_path, capsys):
    assert cli.main(["probes", "--workdir", str(tmp_path)]) == 0
    assert "no probes or measured provenance yet" in capsys.readouterr().out


def test_pods_reap_routes_to_the_reaper(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.runpod/config.toml either
    assert cli.main(["pods", "reap", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fourloops pods reap: no RunPod API key: set RUNPOD_API_KEY, or write it to ~/.runpod/config.toml")
    assert str(tmp_path / ".runpod" / "config.toml") in err


@pytest.mark.parametrize("argv", [[], ["unknown"]])
def test_no_or_an_unknown_subcommand_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert "plan" in capsys.readouterr().err  # the usage lists the subcommands
