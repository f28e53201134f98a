"""The stand-in's contract with RunPod v2 (tests/runpod_v2_contract.yaml) refuses what the real API refuses:
a contract that accepted everything would let a wrong client request pass every test."""

from __future__ import annotations

import copy

import pytest

from runpod_standin import Spec

AUTH = {"Authorization": "Bearer k"}
IMAGE = "runpod/base:1.3.0@sha256:" + "0" * 64
GOOD_CREATE = {"name": "fourloops-x-1", "image": IMAGE, "disk": 150, "ports": ["22/tcp"],
               "env": {"PUBLIC_KEY": "ssh-ed25519 AAAA x"}, "cloud": "SECURE", "gpu": {"id": "NVIDIA A40", "count": 1}}
GOOD_POD = {
    "id": "abc", "name": "fourloops-x-1", "image": IMAGE, "args": "", "disk": 150, "ports": ["22/tcp"], "env": {},
    "registry": None, "status": "RUNNING", "actions": ["stop", "restart", "terminate"], "mounts": {},
    "gpu": {"id": "NVIDIA A40", "count": 1}, "cloud": "SECURE", "dataCenterId": None, "cudaVersion": None,
    "ssh": {"proxy": None, "direct": None}, "template": None, "cost": 0.49, "locked": False,
    "globalNetworking": {"enabled": False}, "runtime": None, "createdAt": "2026-12-01T08:00:00Z", "startedAt": None,
}


@pytest.fixture(scope="module")
def spec():
    return Spec()


def test_the_requests_and_answers_the_client_makes_pass(spec):
    assert spec.check_request("POST", "/v2/pods", {}, GOOD_CREATE, AUTH) == []
    assert spec.check_request("GET", "/v2/pods", {}, None, AUTH) == []
    assert spec.check_request("GET", "/v2/pods/abc", {}, None, AUTH) == []
    assert spec.check_request("POST", "/v2/pods/abc/action", {}, {"action": "terminate"}, AUTH) == []
    query = {"podId": "abc", "bucketSize": "hour", "startTime": "2026-12-01T08:00:00Z"}
    assert spec.check_request("GET", "/v2/billing/pods", query, None, AUTH) == []
    assert spec.check_response("POST", "/v2/pods", 201, GOOD_POD) == []
    assert spec.check_response("GET", "/v2/pods", 200, {"pods": [GOOD_POD]}) == []
    assert spec.check_response("POST", "/v2/pods/abc/action", 204, None) == []


def _without(d, key):
    d = copy.deepcopy(d)
    del d[key]
    return d


BAD_CREATES = {
    "unknown cloud type": dict(GOOD_CREATE, cloud="SPOT"),
    "no image": _without(GOOD_CREATE, "image"),
    "no name": _without(GOOD_CREATE, "name"),
    "empty name": dict(GOOD_CREATE, name=""),
    "a v1 field (volumeInGb)": dict(GOOD_CREATE, volumeInGb=0),
    "v1 gpuTypeIds instead of gpu": dict(_without(GOOD_CREATE, "gpu"), gpuTypeIds=["NVIDIA A40"]),
    "neither gpu nor cpu": _without(GOOD_CREATE, "gpu"),
    "both gpu and cpu": dict(GOOD_CREATE, cpu={"id": "cpu3c", "vcpuCount": 2}),
    "gpu count 0": dict(GOOD_CREATE, gpu={"id": "NVIDIA A40", "count": 0}),
    "gpu without id": dict(GOOD_CREATE, gpu={"count": 1}),
    "unknown gpu field": dict(GOOD_CREATE, gpu={"id": "NVIDIA A40", "kind": "x"}),
    "disk 0": dict(GOOD_CREATE, disk=0),
    "disk as text": dict(GOOD_CREATE, disk="150"),
    "a number in env": dict(GOOD_CREATE, env={"FOURLOOPS_FETCH_MODELS": 1}),
    "ports not a list": dict(GOOD_CREATE, ports="22/tcp"),
    "persistent mount below 10 GB": dict(GOOD_CREATE, mounts={"persistent": {"size": 5, "path": "/workspace"}}),
}


@pytest.mark.parametrize("case", list(BAD_CREATES))
def test_contract_refuses_a_bad_create_request(spec, case):
    errors = spec.check_request("POST", "/v2/pods", {}, BAD_CREATES[case], AUTH)
    assert errors and all(e.startswith("body ") for e in errors), errors


@pytest.mark.parametrize("method,path,query,body,expect", [
    ("POST", "/v2/pods/abc/action", {}, {"action": "delete"}, "body $.action"),
    ("POST", "/v2/pods/abc/action", {}, {"action": "terminate", "force": True}, "body $"),
    ("POST", "/v2/pods/abc/action", {}, None, "missing request body"),
    ("GET", "/v2/billing/pods", {"bucketSize": "minute"}, None, "query bucketSize"),
    ("GET", "/v2/billing/pods", {"lastN": "0"}, None, "query lastN"),
    ("GET", "/v2/billing/pods", {"startTime": "yesterday"}, None, "not RFC 3339"),
    ("GET", "/v2/billing/pods", {"pod_id": "abc"}, None, "query parameter 'pod_id' is not in the contract"),
    ("GET", "/v2/pods", {}, {"x": 1}, "takes no request body"),
    ("DELETE", "/v2/pods/abc", {}, None, "no such operation"),        # the client terminates by action
    ("POST", "/v1/pods", {}, GOOD_CREATE, "no such operation"),        # v1 is retired
], ids=["unknown action", "extra action field", "no action body", "bucket size", "lastN 0", "startTime",
        "unknown query", "body on GET", "DELETE", "v1 path"])
def test_contract_refuses_other_bad_requests(spec, method, path, query, body, expect):
    errors = spec.check_request(method, path, query, body, AUTH)
    assert any(expect in e for e in errors), errors


def test_contract_requires_the_bearer_token(spec):
    assert "missing bearer token" in spec.check_request("GET", "/v2/pods", {}, None, {})


BAD_PODS = {
    "runtime missing (it is required, though nullable)": _without(GOOD_POD, "runtime"),
    "unknown status": dict(GOOD_POD, status="BOOTING"),
    "unknown cloud": dict(GOOD_POD, cloud="SPOT"),
    "ssh.direct missing": dict(GOOD_POD, ssh={"proxy": None}),
    "ssh.direct without a port": dict(GOOD_POD, ssh={"proxy": None, "direct": {"host": "h", "username": "root", "command": "ssh"}}),
    "runtime port public as text": dict(GOOD_POD, runtime={"uptime": 1, "ports": [{"private": 22, "public": "22"}]}),
    "createdAt missing": _without(GOOD_POD, "createdAt"),
}


@pytest.mark.parametrize("case", list(BAD_PODS))
def test_contract_refuses_a_bad_pod_answer(spec, case):
    assert spec.check_response("GET", "/v2/pods/abc", 200, BAD_PODS[case])


def test_contract_allows_null_runtime_ports_and_refuses_a_bad_billing_answer(spec):
    running = dict(GOOD_POD, runtime={"uptime": 3, "ports": [{"private": 22, "public": None, "type": "tcp", "ip": None}]})
    assert spec.check_response("GET", "/v2/pods/abc", 200, running) == []
    totals = {"totalAmount": 0.1, "gpuAmount": 0.1, "cpuAmount": 0.0, "diskAmount": 0.0}
    meta = {"query": {"startTime": "2026-12-01T08:00:00Z", "endTime": "2026-12-01T09:00:00Z", "bucketSize": "hour",
                      "podId": "abc"}, "recordCount": 0, "uniquePodCount": 0, "totals": totals}
    assert spec.check_response("GET", "/v2/billing/pods", 200, {"records": [], "metadata": meta}) == []
    no_total = dict(meta, totals={k: v for k, v in totals.items() if k != "totalAmount"})
    assert spec.check_response("GET", "/v2/billing/pods", 200, {"records": [], "metadata": no_total})
    assert spec.check_response("GET", "/v2/billing/pods", 200, {"records": []})
    assert spec.check_response("POST", "/v2/pods/abc/action", 204, {"id": "abc"})  # 204 has no body
    assert spec.check_response("GET", "/v2/pods/abc", 404, {"title": "Not Found", "status": 404})  # no detail
