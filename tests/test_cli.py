"""The `fourloops` command routes each subcommand to its library function."""

import pytest

from fourloops import cli


@pytest.mark.parametrize("argv", [["plan", "--help"], ["guard", "--help"], ["probes", "--help"], ["pods", "reap", "--help"]])
def test_every_subcommand_is_reachable(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_pods_reap_reaches_the_reaper(capsys):
    with pytest.raises(SystemExit):
        cli.main(["pods", "reap", "--help"])
    assert "--dry-run" in capsys.readouterr().out
