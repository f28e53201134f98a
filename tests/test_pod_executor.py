"""The RunPod executor end to end: real Snakemake, real ssh and rsync to a loopback sshd, the v2 stand-in.

Each test works on a copy of the smoke workdir with one condition's generate outputs removed, so the DAG
is small: generate (pod) and, in the end-to-end test, its keypoints and fit (desk, local).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import COMMIT, FAKE_SECRETS, REPO, SNAKEMAKE, pinned, snakemake_env
from fourloops import compare, pods, provenance, runpod

VENV_PY = str(Path(SNAKEMAKE).with_name("python"))


def _strip_generate(work: Path, cond: str = "A") -> None:
    for p in [work / "results" / "generate" / cond, work / "results" / "provenance" / "generate" / f"{cond}.json"]:
        if p.is_dir():
            for f in p.iterdir():
                f.unlink()
            p.rmdir()
        elif p.exists():
            p.unlink()


def _cmd(work: Path, standin, *targets: str, extra=()) -> list[str]:
    return [
        SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--profile", str(REPO / "profiles" / "smoke"),
        "--directory", str(work), "--executor", "runpod", "--jobs", "2",
        "--runpod-api-url", standin.url,
        "--runpod-remote-python", VENV_PY,       # the stand-in's pod shares this machine's venv
        "--runpod-setup-command", f"{VENV_PY} -c 'import snakemake, fourloops'",
        "--runpod-poll-s", "0.5", *extra, *targets,
    ]


def _env(tmp_path: Path) -> dict:
    return snakemake_env(**FAKE_SECRETS, FOURLOOPS_POD_STATE_DIR=str(tmp_path / "pod-state"))


def _run(work, standin, tmp_path, *targets, extra=(), timeout=400):
    return subprocess.run(_cmd(work, standin, *targets, extra=extra), capture_output=True, text=True,
                          env=_env(tmp_path), cwd=work, timeout=timeout)


def _wait_remote_job(standin, timeout=120.0) -> str:
    """Wait until a pod runs Snakemake's remote job; return that pod's id."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for pod in list(standin.pods.values()):
            ws = f"FOURLOOPS_WORKSPACE={pod['workspace']}".encode()
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if ws in env and b"snakemake" in cmd and b"remote" in cmd:
                    return pod["id"]
        time.sleep(0.3)
    raise AssertionError("no remote job started on a pod")


def _no_secrets(work: Path) -> None:
    for sub in (".snakemake", "logs", "results", "benchmarks"):
        for f in (work / sub).rglob("*"):
            if f.is_file():
                data = f.read_bytes()
                for name, value in FAKE_SECRETS.items():
                    assert value.encode() not in data, f"{name} leaked into {f}"


def test_pod_jobs_remote_desk_jobs_local_bytes_identical_teardown_verified(built_copy, smoke_run, runpod_standin, tmp_path):
    """generate runs on the pod (after a SECURE->COMMUNITY fallback), keypoints and fit locally; the
    generated images come back byte-identical to the local run; teardown verified; cost printed; no
    secret anywhere; every API request matched the v2 contract."""
    work = built_copy
    _strip_generate(work)
    for f in (work / "results" / "keypoints" / "A").glob("*"):
        f.unlink()
    (work / "results" / "fit" / "A.json").unlink()
    runpod_standin.available = {("NVIDIA L40S", "COMMUNITY")}
    t0 = time.time()
    proc = _run(work, runpod_standin, tmp_path, "results/fit/A.json")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    # pod rule remote, desk rules local
    assert re.search(r"^rule generate:", out, re.M) and re.search(r"^localrule keypoints_generated:", out, re.M)
    assert re.search(r"^localrule fit:", out, re.M)
    assert "placed on NVIDIA L40S (COMMUNITY)" in out
    # the pod's views and manifest against the local run's: the images byte-identical, the manifest equal once the
    # fields that measure the run are out (config/compare.yaml: its seconds, the path the model was read from)
    rows = compare.compare_trees(smoke_run["workdir"], work, include=["generate/A/**"])
    assert len(rows) == 9 and {r.verdict for r in rows} == {"equal"}, rows
    assert {r.figures for r in rows if r.artifact.endswith(".png")} == {"same bytes"}, rows
    assert (work / "logs" / "generate" / "A.log").stat().st_mtime > t0
    assert (work / "benchmarks" / "generate" / "A.tsv").stat().st_mtime > t0
    record = json.loads((work / "results" / "provenance" / "generate" / "A.json").read_text())
    assert record["code"]["commit"] == provenance.code_version(REPO)["commit"]  # .git went to the pod
    assert "--executor runpod" in record["invocation"] and "--mode remote" not in record["invocation"]
    # teardown through both surfaces, and the figure for the note
    assert re.search(r"pod \w+ terminated; verified gone from the pod list and billing stopped", out)
    m = re.search(r"teardown verified ([\d.]+) s after the last pod job ended", out)
    assert m and float(m.group(1)) <= 120, out[-3000:]
    print(f"\nteardown after the last pod job: {m.group(1)} s")
    assert re.search(r"session cost \$\d+\.\d{4} over 1 pod", out)
    assert runpod_standin.listed() == []
    # the pod was created the way the runbook says
    body = next(iter(runpod_standin.pods.values()))["body"]
    assert body["disk"] == 150 and body["ports"] == ["22/tcp"] and "mounts" not in body
    assert "@sha256:" in body["image"] and body["name"].startswith("fourloops-")
    assert body["env"]["PUBLIC_KEY"].startswith("ssh-ed25519 ") and body["env"]["HF_TOKEN"] == FAKE_SECRETS["HF_TOKEN"]
    # the pod knows it is the pod (whose walls apply) and fetches the configured weights once
    assert body["env"]["FOURLOOPS_MACHINE"] == "pod" and body["env"]["FOURLOOPS_FETCH_MODELS"] == "1"
    assert not runpod_standin.violations, runpod_standin.violations
    _no_secrets(work)
    assert list((tmp_path / "pod-state").iterdir()) == []  # the run's claim is released, its SSH keys removed


def test_ssh_dies_mid_job_fails_terminates_then_rerun_completes(built_copy, runpod_standin, tmp_path):
    work = built_copy
    _strip_generate(work)
    proc = subprocess.Popen(_cmd(work, runpod_standin, "results/generate/A/views.json"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=_env(tmp_path), cwd=work)
    pod_id = _wait_remote_job(runpod_standin)
    runpod_standin.kill_ssh(pod_id)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode != 0
    assert "ssh to the pod died mid-job" in out and "no longer answers and was terminated" in out, out[-4000:]
    assert runpod_standin.pods[pod_id]["terminated_at"] is not None and runpod_standin.listed() == []
    rerun = _run(work, runpod_standin, tmp_path, "results/generate/A/views.json")
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-4000:]
    assert (work / "results" / "generate" / "A" / "views.json").exists()
    assert runpod_standin.listed() == [] and len(runpod_standin.pods) == 2, (rerun.stdout + rerun.stderr)[-3000:]
    assert not runpod_standin.violations, runpod_standin.violations


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_terminates_the_pod(built_copy, runpod_standin, tmp_path, sig):
    work = built_copy
    _strip_generate(work)
    proc = subprocess.Popen(_cmd(work, runpod_standin, "results/generate/A/views.json"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=_env(tmp_path), cwd=work)
    _wait_remote_job(runpod_standin)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=180)
    assert runpod_standin.listed() == [], out[-4000:]
    assert re.search(r"verified gone from the pod list and billing stopped", out), out[-4000:]
    assert "session cost $" in out


def test_sigkill_leaves_an_orphan_that_reap_terminates(built_copy, runpod_standin, tmp_path):
    work = built_copy
    _strip_generate(work)
    proc = subprocess.Popen(_cmd(work, runpod_standin, "results/generate/A/views.json"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=_env(tmp_path), cwd=work)
    pod_id = _wait_remote_job(runpod_standin)
    proc.kill()
    proc.wait(30)
    assert [p["id"] for p in runpod_standin.listed()] == [pod_id]  # the orphan bills on
    state = tmp_path / "pod-state"
    (keys,) = state.glob("*.keys-*")  # the dead run's SSH private key, still on disk
    assert (keys / "id_ed25519").is_file() and keys.stat().st_mode & 0o077 == 0
    client = runpod.Client(FAKE_SECRETS["RUNPOD_API_KEY"], runpod_standin.url)
    results = pods.reap(client, "fourloops", state, timeout_s=60, poll_s=0.5, log=lambda m: None)
    assert [td.pod_id for td in results] == [pod_id] and results[0].verified
    assert runpod_standin.listed() == []
    assert list(state.iterdir()) == []  # the run's claim and its keys went with it


def test_failed_remote_job_reports_the_remote_log_tail(built_copy, runpod_standin, tmp_path):
    work = built_copy
    _strip_generate(work)
    failing = f"{VENV_PY} -c 'import sys; print(\"boom from the pod\"); sys.exit(3)'"
    proc = _run(work, runpod_standin, tmp_path, "results/generate/A/views.json",
                extra=("--runpod-remote-python", failing), timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "job failed on pod" in out and "(exit 3)" in out and "boom from the pod" in out, out[-3000:]
    assert runpod_standin.listed() == [] and "session cost $" in out


@pytest.mark.parametrize("fault", ["no_instances", "never_ready"])
def test_pod_that_cannot_be_had_fails_the_job_clearly(built_copy, runpod_standin, tmp_path, fault):
    work = built_copy
    _strip_generate(work)
    extra = ()
    if fault == "no_instances":
        runpod_standin.available = set()
    else:
        runpod_standin.runtime_null_s = 60  # RUNNING with a null runtime: not ready
        extra = ("--runpod-ready-timeout-s", "3")
    proc = _run(work, runpod_standin, tmp_path, "results/generate/A/views.json", extra=extra, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    if fault == "no_instances":
        assert "no instances available for any candidate" in out and "NVIDIA A40 (COMMUNITY)" in out
        assert len(runpod_standin.create_attempts) == 6 and runpod_standin.pods == {}
    else:
        assert "not ready within 3 s; terminated" in out and "status=RUNNING runtime=null" in out, out[-3000:]
        assert runpod_standin.listed() == []
    assert not runpod_standin.violations, runpod_standin.violations



def test_a_pod_jobs_unpinned_model_is_refused_on_the_desk_and_a_pinned_one_is_what_the_pod_downloads(tmp_path):
    """A pod job's machine needs are met on the pod, but a hub revision that is no commit is the config's: the
    desk names it before a pod is rented. Pinned, the pod downloads that commit, not whatever the hub's main is."""
    work = tmp_path / "real"
    work.mkdir()
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(work), "--executor", "runpod", "--jobs", "2",
           "--runpod-api-url", "http://127.0.0.1:9"]  # nothing answers there: a run that calls the API fails
    env = snakemake_env(**FAKE_SECRETS, FOURLOOPS_POD_STATE_DIR=str(tmp_path / "pod-state"),
                        HF_HOME=str(tmp_path / "hf"))
    run = subprocess.run(cmd + ["results/generate/A/views.json"], capture_output=True, text=True, env=env, timeout=120)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "nothing was started" in out, out[-3000:]
    assert "config generator.revision is not set (rule generate)" in out, out[-3000:]
    run = subprocess.run(cmd + ["--configfile", pinned(tmp_path), "--", "results/fit/A.json"],
                         capture_output=True, text=True, env=env, timeout=120)
    out = run.stdout + run.stderr
    assert f"runpod: the pod jobs load OmniGen2/OmniGen2@{COMMIT[:12]}, downloaded in that order" in out, out[-3000:]
    # the desk's own job (keypoints: no CUDA, no checkpoint here) is what stops this one; nothing started
    assert run.returncode != 0 and "(rule keypoints)" in out and "config generator.revision" not in out, out[-3000:]
    assert not (work / "results").exists() and not any((tmp_path / "pod-state").glob("*"))
    # a generator directory of this machine: the pod's container would not have it; named before a pod is rented
    local = tmp_path / "weights" / "omnigen2"
    local.mkdir(parents=True)
    (local / "config.json").write_text("{}")
    (tmp_path / "local.yaml").write_text(f"generator:\n  model: {local}\n")
    run = subprocess.run(cmd + ["--configfile", str(tmp_path / "local.yaml"), "--", "results/fit/A.json"],
                         capture_output=True, text=True, env=env, timeout=120)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "nothing was started" in out, out[-3000:]
    assert f"config generator.model = '{local}' is a directory on this machine (rule generate, " in out, out[-3000:]
    assert not (work / "results").exists() and not any((tmp_path / "pod-state").glob("*"))


def test_the_pods_download_runs_once_per_repo_at_its_commit():
    from snakemake_executor_plugin_runpod.executor import fetch_commands

    weights = [[("OmniGen2/OmniGen2", "a" * 40)], [("Qwen/Qwen3-VL-8B-Instruct", "b" * 40), ("EditScore/x", "c" * 40)]]
    assert fetch_commands("hf download {models} > /dev/null", weights) == [
        f"hf download OmniGen2/OmniGen2 --revision {'a' * 40} > /dev/null",
        f"hf download Qwen/Qwen3-VL-8B-Instruct --revision {'b' * 40} > /dev/null && "
        f"hf download EditScore/x --revision {'c' * 40} > /dev/null"]
    assert fetch_commands("python podwork.py fetch", weights) == ["python podwork.py fetch"]  # one for every job
