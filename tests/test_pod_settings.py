"""The RunPod executor's settings: defaults on the fields, precedence (flag > machines.yaml > default),
and every bad value refused naming the flag or key, the value and what is allowed. No pod, no network."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO, SNAKEMAKE, snakemake_env
from fourloops import machines
from snakemake_executor_plugin_runpod import settings
from snakemake_executor_plugin_runpod.settings import ExecutorSettings, SettingsError


def _machines_file(tmp_path: Path, edit=None) -> Path:
    data = machines.load(REPO / "config" / "machines.yaml")
    if edit:
        edit(data)
    path = tmp_path / "machines.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_defaults_live_on_the_fields_with_help():
    s = ExecutorSettings()
    assert (s.pool_size, s.ready_timeout_s, s.idle_teardown_s, s.poll_s, s.teardown_timeout_s) == (1, 600.0, 300.0, 5.0, 120.0)
    assert s.remote_python == "{workspace}/fourloops/venv/bin/python" and s.setup_command == "true"
    assert s.name_prefix == "fourloops" and s.machines is None and s.given == frozenset()
    assert all(f.metadata["help"] for f in dataclasses.fields(ExecutorSettings))


def test_flag_beats_machines_yaml_beats_default(tmp_path):
    def edit(d):
        d["pod"]["runpod"].update(pool_size=3, poll_s=2)
        del d["pod"]["runpod"]["idle_teardown_s"]
    path = _machines_file(tmp_path, edit)
    cfg = settings.load(ExecutorSettings(machines=path, pool_size=2), tmp_path)
    assert cfg.settings.pool_size == 2            # the flag
    assert cfg.settings.poll_s == 2.0             # machines.yaml
    assert cfg.settings.idle_teardown_s == 300.0  # the field's default
    assert cfg.settings.setup_command.startswith("(command -v uv")  # pod.runpod.setup
    assert cfg.pod.gpus[0] == "NVIDIA RTX 6000 Ada Generation" and cfg.pod.disk_gb == 150
    assert cfg.pod.cloud_types == ("SECURE", "COMMUNITY") and cfg.pod.ports == ("22/tcp",)


@pytest.mark.parametrize("name,value,allowed", [
    ("pool_size", 0, "an integer >= 1"),
    ("pool_size", -1, "an integer >= 1"),
    ("poll_s", float("nan"), "seconds > 0"),
    ("poll_s", float("inf"), "seconds > 0"),
    ("poll_s", 0.0, "seconds > 0"),
    ("ready_timeout_s", -5.0, "seconds > 0"),
    ("idle_teardown_s", -1.0, "seconds >= 0"),
    ("teardown_timeout_s", 0.0, "seconds > 0"),
    ("api_url", "ftp://api.runpod.io", "http:// or https://"),
    ("name_prefix", "four loops", "letters, digits and dashes"),
    ("remote_python", " ", "a non-empty command"),
    ("setup_command", "", "a non-empty command"),
])
def test_bad_flag_is_refused_naming_it(name, value, allowed):
    with pytest.raises(SettingsError) as err:
        ExecutorSettings(**{name: value})
    msg = str(err.value)
    assert msg.startswith(settings.flag(name) + " = ") and repr(value) in msg and allowed in msg, msg


def test_missing_machines_file_is_refused(tmp_path):
    with pytest.raises(SettingsError, match=r"--runpod-machines = '.*nowhere.yaml': no such file"):
        ExecutorSettings(machines=tmp_path / "nowhere.yaml")


def _set(key, value):
    def edit(d):
        d["pod"]["runpod"][key] = value
    return edit


def _pod(key, value):
    def edit(d):
        d["pod"][key] = value
    return edit


def _drop_pod(d):
    del d["pod"]


# machines.yaml is validated by its own schema (config/machines.schema.yaml) when fourloops.machines loads it:
# each refusal names the file and line, the key, the value and what is allowed.
@pytest.mark.parametrize("edit,expect", [
    (_set("pool_size", "lots"), "pod.runpod.pool_size = 'lots': not allowed; allowed: a whole number >= 1"),
    (_set("pool_size", True), "pod.runpod.pool_size = true: not allowed; allowed: a whole number >= 1"),
    (_set("pool_size", 1.5), "pod.runpod.pool_size = 1.5: a decimal number where a whole number is expected"),
    (_set("poll_s", float("nan")), "pod.runpod.poll_s = .nan: NaN is not a number a run can use"),
    (_set("idle_teardown_s", -1), "pod.runpod.idle_teardown_s = -1: not allowed; allowed: a finite number >= 0"),
    (_set("ready_timeout_s", "10m"), "pod.runpod.ready_timeout_s = '10m': not allowed; allowed: a finite number > 0"),
    (_set("python", 3), "pod.runpod.python = 3: not allowed; allowed: text"),
    (_set("name_prefix", "x/y"), "pod.runpod.name_prefix = 'x/y': not allowed; allowed: text matching ^[a-z0-9]"),
    (_set("image", "runpod/base:latest"), "pod.runpod.image = 'runpod/base:latest': not allowed; allowed: the pod image, pinned by digest: text matching @sha256:"),
    (_set("cloud_types", ["SPOT"]), "pod.runpod.cloud_types[0] = 'SPOT': not allowed; allowed: one of ['SECURE', 'COMMUNITY']"),
    (_set("cloud_types", []), "pod.runpod.cloud_types = []: not allowed; allowed: a non-empty value"),
    (_set("container_disk_gb", 0), "pod.runpod.container_disk_gb = 0: not allowed; allowed: a whole number >= 10"),
    (_set("container_disk_gb", "150"), "pod.runpod.container_disk_gb = '150': '150' is text in YAML: write 150"),
    (_set("ports", ["8888/http"]), "pod.runpod.ports = ['8888/http']: expected \"22/tcp\" among them"),
    (_set("ports", ["22"]), "pod.runpod.ports[0] = '22': not allowed; allowed: text matching ^[0-9]{1,5}/(tcp|http)$"),
    (_set("pod_env", ["HF TOKEN"]), "pod.runpod.pod_env[0] = 'HF TOKEN': not allowed; allowed: text matching ^[A-Z_]"),
    (_set("widen_gpus", "NVIDIA A40"), "pod.runpod.widen_gpus = 'NVIDIA A40': not allowed; allowed: a list"),
    (_pod("gpu_classes", []), "pod.gpu_classes = []: not allowed; allowed: a non-empty value"),
    (_pod("gpu_classes", ["NVIDIA A40"]), "pod.gpu_classes[0] = 'NVIDIA A40': not allowed; allowed: a mapping"),
    (_pod("runpod", ["x"]), "pod.runpod = ['x']: not allowed; allowed: a mapping"),
    (_drop_pod, "the key 'pod' is missing; allowed: a mapping with the keys ['pod']"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None)
def test_bad_machines_yaml_is_refused_naming_the_key(tmp_path, edit, expect):
    path = _machines_file(tmp_path, edit)
    with pytest.raises(SettingsError) as err:
        settings.load(ExecutorSettings(machines=path), tmp_path)
    assert expect in str(err.value), str(err.value)
    assert str(path) in str(err.value)


def test_a_flag_given_wins_over_the_files_value(tmp_path):
    path = _machines_file(tmp_path, _set("pool_size", 3))
    assert settings.load(ExecutorSettings(machines=path), tmp_path).settings.pool_size == 3
    assert settings.load(ExecutorSettings(machines=path, pool_size=2), tmp_path).settings.pool_size == 2


def _snakemake(tmp_path, *extra, env):
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--profile", str(REPO / "profiles" / "smoke"),
           "--directory", str(tmp_path), "--executor", "runpod", "--jobs", "1", *extra, "results/render/az000.png"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def test_pod_run_without_api_key_says_only_what_to_do(tmp_path):
    """Issue 9: no key gave a 25-line traceback before the message. Now: one clear line, exit 1, no pod
    record written, no job started."""
    home = tmp_path / "home"
    home.mkdir()
    env = snakemake_env(HOME=str(home), FOURLOOPS_POD_STATE_DIR=str(tmp_path / "pod-state"),
                        ANNY_CACHE_DIR=os.environ["ANNY_CACHE_DIR"])
    env.pop("RUNPOD_API_KEY", None)
    work = tmp_path / "work"
    work.mkdir()
    proc = _snakemake(work, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert ('Error: runpod: no RunPod API key: set RUNPOD_API_KEY, or write it to ~/.runpod/config.toml '
            'as [default] apikey = "..."') in out, out
    assert "Traceback" not in out and '  File "' not in out, out
    assert not (tmp_path / "pod-state").exists() and not (work / "results").exists()


def test_bad_flag_through_snakemake_is_one_line(tmp_path):
    proc = _snakemake(tmp_path, "--runpod-poll-s", "0", env=snakemake_env(RUNPOD_API_KEY="k"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Error: --runpod-poll-s = 0.0 is not allowed: expected a number of seconds > 0" in out, out
    assert "Traceback" not in out


def test_resource_value_unwraps_rule_and_job_resources():
    from snakemake.iocontainers import ResourceList
    from snakemake.resources import Resources

    rule = Resources.from_mapping({"profile": "pod", "vram_mb": 46000})
    assert machines.resource_value(rule, "profile") == "pod" and machines.resource_value(rule, "vram_mb") == 46000
    assert machines.resource_value(rule, "mem_mb", 7) == 7
    job = ResourceList(fromdict={"profile": "desk"})
    assert machines.resource_value(job, "profile") == "desk" and machines.resource_value(job, "gpu", 0) == 0
    assert machines.resource_value(None, "profile", "desk") == "desk"


def test_the_status_checks_run_every_second_from_the_first():
    """RemoteExecutor starts its status thread before __post_init__; its first sleep must not be Snakemake's 10 s
    default (each run's first job waited it out)."""
    from snakemake_executor_plugin_runpod.executor import Executor

    bare = object.__new__(Executor)  # what the status thread sees while __post_init__ still runs
    assert bare.next_seconds_between_status_checks == 1
