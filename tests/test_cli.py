"""The `fourloops` command routes each subcommand to its code: each test checks that code's own outcome."""

import json

import pytest

from conftest import REPO
from fourloops import cli, guard


def test_every_subcommand_is_tested_here():
    """Here, or in its own file: compare in tests/test_compare.py (it drives `fourloops compare` throughout)."""
    assert set(cli.SUBCOMMANDS) == {"plan", "guard", "probes", "pods", "compare"}


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


def test_plan_names_a_config_file_or_machine_snakemake_would_refuse_with_its_file_and_line(tmp_path, capsys):
    """Snakemake refuses such a --configfile before the workflow is read, in words that name no file or line (or
    with a traceback); the plan says what and where, and plans nothing."""
    (tmp_path / "bad.yaml").write_text("render:\n  image_size: 512\n   camera: {}\n")
    (tmp_path / "list.yaml").write_text("- 1\n")
    (tmp_path / "latin.yaml").write_bytes(b"seed: \xe9\n")
    files = [str(tmp_path / n) for n in ("bad.yaml", "list.yaml", "latin.yaml", "nope.yaml")] + ["results/ladder.csv"]
    code = cli.main(["plan", "--directory", str(tmp_path), "--machine", "laptop", "--workflow-profile",
                     "profiles/nope", "--configfile", *files, "--", "results/ladder.csv"])
    assert code == 2 and capsys.readouterr().err.splitlines()[1:] == [
        f"  {files[0]}, line 3, column 10: mapping values are not allowed here; allowed: YAML, indented with spaces "
        "(never tabs), each nested key indented deeper than its parent",
        f"  {files[1]}: holds list, not a mapping of config keys; allowed: keys such as azimuths:, render:, "
        "conditions: at the top level",
        f"  {files[2]}: not UTF-8 text (invalid continuation byte at byte 6); allowed: YAML saved as UTF-8",
        f"  config file {files[3]}: does not exist; allowed: a YAML file of config keys",
        "  config file results/ladder.csv: does not exist (a target? --configfile takes every word after it: end it "
        "with -- before the targets); allowed: a YAML file of config keys",
        "  --workflow-profile 'profiles/nope': no profile there (Snakemake would plan without one, silently); "
        "allowed: one of profiles/{default,pod,sizing,sizing-gpu,slurm,smoke}, or a folder holding a config.yaml",
        "  --machine 'laptop': not a machine of config/machines.yaml; allowed: one of ['desk', 'pod', 'h200', 'h200_pair', "
        "'cluster']"]
    assert not any(p.name == ".snakemake" for p in tmp_path.iterdir())  # nothing ran


@pytest.mark.parametrize("extra,expect", [
    ("frobnicate: 1\nrerun-trigers: [mtime]\n",
     ["config.yaml, line 17: frobnicate: not a Snakemake option; allowed: a long option of `snakemake --help`",
      "config.yaml, line 18: rerun-trigers: not a Snakemake option; allowed: one of ['rerun-triggers', "]),
    ("cores: 1\n", ["config.yaml, line 17, column 1: key 'cores' appears twice in one mapping (first on line 8)"]),
], ids=["unknown-keys", "twice"])
def test_plan_names_a_profile_key_snakemake_would_refuse_or_silently_replace(tmp_path, capsys, extra, expect):
    """Snakemake refuses a profile key that is no option with its whole usage and `unrecognized arguments:
    --frobnicate=1`, naming no file, and keeps the last of a key given twice, silently."""
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text((REPO / "profiles" / "smoke" / "config.yaml").read_text() + extra)
    code = cli.main(["plan", "--workflow-profile", str(profile), "--directory", str(tmp_path / "work"),
                     "results/render/az000.png"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("fourloops plan: nothing was planned:"), err
    for words in expect:
        assert f"{profile / words}" in err, (words, err)


def test_a_profile_key_written_as_its_option_is_one(tmp_path):
    """configargparse takes a profile key with or without its leading -- (`keep-going`, `--keep-going`)."""
    from fourloops.config import profile_problems

    (tmp_path / "config.yaml").write_text("--keep-going: true\nrerun-incomplete: true\n--frobnicate: 1\n")
    assert [p.split(": ", 1)[1] for p in profile_problems(tmp_path)] == [
        "--frobnicate: not a Snakemake option; allowed: a long option of `snakemake --help`, without its --"]


def test_plan_under_the_runpod_executor_names_a_bad_pod_life_file_without_a_traceback(tmp_path, monkeypatch, capsys):
    """config/pod_life.yaml is read only when the plan prices a pod: its refusal is the plan's exit 2 with the file,
    line, key and value, not a PodLifeError traceback after the DAG."""
    from fourloops import podbill

    bad = tmp_path / "pod_life.yaml"
    bad.write_text(podbill.LIFE_PATH.read_text().replace("  value: 14.0", "  value: -14.0", 1))
    monkeypatch.setattr(podbill, "LIFE_PATH", bad)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["plan", "--workflow-profile", str(REPO / "profiles" / "pod"), "--directory", str(tmp_path),
                  "results/render/az000.png"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err and "fourloops plan: nothing was planned:" in err, err
    assert f"{bad}, line 30: rsync_mb_s.value = -14.0: not allowed; allowed: a finite number > 0" in err, err


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


def test_the_profile_file_checked_is_the_one_snakemake_reads(tmp_path):
    """Snakemake 9.27.1 reads a profile's newest config.vN+.yaml over its config.yaml (and a profile.yaml, and a
    profile given as its file): the check read config.yaml alone, so a frobnicate in the file Snakemake reads went
    unnamed, to Snakemake's whole usage and 'unrecognized arguments: --frobnicate=1'."""
    from fourloops.config import profile_problems

    (tmp_path / "config.yaml").write_text("cores: 1\n")
    (tmp_path / "config.v8+.yaml").write_text("cores: 1\nfrobnicate: 1\n")
    assert profile_problems(tmp_path) == [
        f"{tmp_path / 'config.v8+.yaml'}, line 2: frobnicate: not a Snakemake option; allowed: a long option of "
        "`snakemake --help`, without its --"]
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "profile.yaml").write_text("frobnicate: 1\n")
    assert [p.split(": ", 1)[1] for p in profile_problems(alone)] == [
        "frobnicate: not a Snakemake option; allowed: a long option of `snakemake --help`, without its --"]
    assert [p.split(": ", 1)[1] for p in profile_problems(alone / "profile.yaml")] == [
        "frobnicate: not a Snakemake option; allowed: a long option of `snakemake --help`, without its --"]


@pytest.mark.parametrize("given", ["pod", "none"])
def test_plan_takes_a_workflow_profile_as_snakemake_finds_it(tmp_path, monkeypatch, capsys, given):
    """Snakemake finds `--workflow-profile pod` as profiles/pod beside the Snakefile, and takes `none` for no
    workflow profile at all; the plan refused both from any other folder: "no profile there (Snakemake would plan
    without one, silently)"."""
    monkeypatch.chdir(tmp_path)
    code = cli.main(["plan", "--workflow-profile", given, "--machine", "laptop", "results/render/az000.png"])
    err = capsys.readouterr().err
    assert code == 2 and err.splitlines()[1:] == [
        "  --machine 'laptop': not a machine of config/machines.yaml; allowed: one of ['desk', 'pod', 'h200', 'h200_pair', "
        "'cluster']"], err


def test_plan_names_a_workflow_profile_folder_without_a_profile_file(tmp_path, monkeypatch, capsys):
    """A folder that exists but holds no config.yaml or profile.yaml: Snakemake stops on it (its own words), it does
    not plan without a profile, as the plan's message said."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    code = cli.main(["plan", "--workflow-profile", "empty", "results/render/az000.png"])
    err = capsys.readouterr().err
    assert code == 2 and err.splitlines()[1].startswith(
        "  --workflow-profile 'empty': empty holds no config.yaml or profile.yaml (Snakemake stops, naming neither "
        "this command nor the profiles it ships); allowed: one of profiles/{default,"), err


def test_plan_under_slurm_without_a_cluster_in_the_machines_file_says_so_without_a_traceback(tmp_path, monkeypatch,
                                                                                           capsys):
    """The cluster a SLURM run targets is looked up before any job (smk prepare_checked, and the plan's build): with
    none in machines.yaml the plan ended in a MachinesError traceback."""
    import yaml

    from fourloops import machines

    data = yaml.safe_load(machines.DEFAULT_PATH.read_text())
    del data["cluster"]
    path = tmp_path / "machines.yaml"
    path.write_text(yaml.safe_dump(data))
    load = machines.load
    monkeypatch.setattr(machines, "load", lambda *a, **kw: load(path))
    with pytest.raises(SystemExit) as exit_:
        cli.main(["plan", "--workflow-profile", str(REPO / "profiles" / "slurm"), "--directory", str(tmp_path / "w"),
                  "results/render/az000.png"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err, err
    assert "config/machines.yaml has no SLURM cluster (a machine with a `slurm:` section" in err, err
