"""The RunPod v2 client (src/fourloops/runpod.py) against the stand-in: fast, no Snakemake."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FAKE_SECRETS, REPO
from fourloops import pods, runpod

KEY = FAKE_SECRETS["RUNPOD_API_KEY"]
IMAGE = "runpod/base:1.3.0-rc.164-ubuntu2404@sha256:95357957d7660542b37226fb31863c4510502006f2018efe23e2869137daf000"


def body(name="fourloops-test-1", **env):
    return {"name": name, "image": IMAGE, "disk": 150, "ports": ["22/tcp"], "env": {"PUBLIC_KEY": "ssh-ed25519 AAAA x", **env}}


def test_api_key_env_then_config_and_the_bare_apikey_trap(tmp_path):
    assert runpod.read_api_key({"RUNPOD_API_KEY": KEY}, tmp_path / "none.toml").value == KEY
    good = tmp_path / "good.toml"
    good.write_text(f'[default]\napikey = "{KEY}"\n')
    k = runpod.read_api_key({}, good)
    assert k.value == KEY and k.note is None
    bare = tmp_path / "bare.toml"
    bare.write_text(f'apikey = "{KEY}"\n')
    k = runpod.read_api_key({}, bare)
    assert k.value == KEY and "[default]" in k.note and KEY not in k.note
    with pytest.raises(runpod.RunPodError):
        runpod.read_api_key({}, tmp_path / "none.toml")
    assert KEY not in repr(k)


def test_standin_rejects_requests_outside_the_v2_contract(runpod_standin):
    c = runpod.Client(KEY, runpod_standin.url)
    with pytest.raises(runpod.RunPodError) as err:
        c.create_pod({"name": "x", "volumeInGb": 0})  # a v1 field: not in CreatePodRequest
    assert err.value.status == 422
    assert runpod_standin.violations  # recorded
    runpod_standin.violations.clear()
    with pytest.raises(runpod.RunPodError) as err:
        runpod.Client("wrong-key", runpod_standin.url).list_pods()
    assert err.value.status == 401


def test_running_with_null_runtime_is_not_ready_then_direct_ssh(runpod_standin):
    runpod_standin.runtime_null_s = 1.5
    c = runpod.Client(KEY, runpod_standin.url)
    pod = c.create_pod(dict(body(), gpu={"id": "NVIDIA A40", "count": 1}, cloud="SECURE"))
    seen_null_running = False
    for _ in range(100):
        p = c.get_pod(pod["id"])
        if p["status"] == "RUNNING" and p["runtime"] is None:
            seen_null_running = True
            assert runpod.direct_ssh(p) is None
        if runpod.direct_ssh(p):
            break
        time.sleep(0.1)
    assert seen_null_running
    host, port, user = runpod.direct_ssh(p)
    assert (host, port) == ("127.0.0.1", runpod_standin.sshd.port) and "runpod.io" not in host
    assert not runpod_standin.violations


def test_fallback_secure_to_community_then_clear_error_when_exhausted(runpod_standin):
    c = runpod.Client(KEY, runpod_standin.url)
    gpus = ["NVIDIA RTX 6000 Ada Generation", "NVIDIA L40S", "NVIDIA A40"]
    runpod_standin.available = {("NVIDIA L40S", "COMMUNITY")}
    pod = runpod.create_with_fallback(c, body(), gpus, ["SECURE", "COMMUNITY"], log=lambda m: None)
    assert (pod["gpu"]["id"], pod["cloud"]) == ("NVIDIA L40S", "COMMUNITY")
    assert runpod_standin.create_attempts == [(g, "SECURE") for g in gpus] + [("NVIDIA RTX 6000 Ada Generation", "COMMUNITY"), ("NVIDIA L40S", "COMMUNITY")]
    runpod_standin.available = set()
    with pytest.raises(runpod.NoInstancesError) as err:
        runpod.create_with_fallback(c, body("fourloops-test-2"), gpus, ["SECURE", "COMMUNITY"], log=lambda m: None)
    assert "NVIDIA A40 (COMMUNITY)" in str(err.value) and "machines.yaml" in str(err.value)
    assert not runpod_standin.violations


def test_terminate_verified_through_list_and_billing(runpod_standin):
    c = runpod.Client(KEY, runpod_standin.url)
    pod = c.create_pod(dict(body(HF_TOKEN=FAKE_SECRETS["HF_TOKEN"]), gpu={"id": "NVIDIA A40", "count": 1}))
    time.sleep(1.0)
    since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
    assert c.pod_billing(pod["id"], since) > 0
    td = runpod.terminate_verified(c, pod["id"], since, timeout_s=30, poll_s=0.5)
    assert td.verified and td.cost_usd > 0
    assert all(p["id"] != pod["id"] for p in c.list_pods())
    assert c.pod_billing(pod["id"], since) == pytest.approx(td.cost_usd)
    assert not runpod_standin.violations


def test_reap_terminates_pods_no_live_run_owns(runpod_standin, tmp_path):
    c = runpod.Client(KEY, runpod_standin.url)
    orphan = c.create_pod(dict(body("fourloops-deadrun-1"), gpu={"id": "NVIDIA A40", "count": 1}))
    owned = c.create_pod(dict(body("fourloops-liverun-1"), gpu={"id": "NVIDIA A40", "count": 1}))
    foreign = c.create_pod(dict(body("someone-else-1"), gpu={"id": "NVIDIA A40", "count": 1}))
    live = pods.RunRecord("liverun", tmp_path)
    live.add(owned["id"], "fourloops-liverun-1")
    dead = pods.RunRecord("deadrun", tmp_path)
    dead.add(orphan["id"], "fourloops-deadrun-1")
    # a dead pid owns the orphan
    rec = dead.path.read_text().replace(f'"pid": {__import__("os").getpid()}', '"pid": 999999999')
    dead.path.write_text(rec)
    results = pods.reap(c, "fourloops", tmp_path, timeout_s=30, poll_s=0.5, log=lambda m: None)
    assert [td.pod_id for td in results] == [orphan["id"]] and results[0].verified
    left = {p["id"] for p in c.list_pods()}
    assert owned["id"] in left and foreign["id"] in left and orphan["id"] not in left


def test_pods_main_reap_cli(runpod_standin, tmp_path, monkeypatch):
    c = runpod.Client(KEY, runpod_standin.url)
    c.create_pod(dict(body("fourloops-gone-1"), gpu={"id": "NVIDIA A40", "count": 1}))
    monkeypatch.setenv("RUNPOD_API_KEY", KEY)
    monkeypatch.setenv("FOURLOOPS_POD_STATE_DIR", str(tmp_path))
    assert pods.main(["reap", "--api-url", runpod_standin.url, "--timeout-s", "30"]) == 0
    assert c.list_pods() == []
