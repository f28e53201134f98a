"""A small RunPod REST v2 client of our own: credentials, pods, the GPU fallback, readiness, billing.

v1 (rest.runpod.io/v1) was retired on 2026-11-15; this speaks v2 (`status`, `runtime`, `ssh.direct`,
`POST /v2/pods/{id}/action`, `/v2/billing/pods`). The base URL is configurable so that tests point it at
the stand-in in tests/runpod_standin.py.

Secrets: the API key travels only in the Authorization header; it is never logged, and every error
text passes through `fourloops.provenance.redact`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from fourloops.provenance import redact

DEFAULT_BASE_URL = "https://api.runpod.io"
CONFIG_TOML = Path("~/.runpod/config.toml")
NO_INSTANCES = "no instances"


class RunPodError(RuntimeError):
    def __init__(self, message: str, status: int | None = None, detail: str = ""):
        super().__init__(redact(message))
        self.status = status
        self.detail = redact(detail)


class NoInstancesError(RunPodError):
    """Every (cloud type, GPU type) candidate answered that no instances are available."""


@dataclass
class ApiKey:
    value: str = field(repr=False)
    source: str
    note: str | None = None  # something the user should be told (the bare-apikey trap)


def read_api_key(env=None, config_path: str | Path | None = None) -> ApiKey:
    """RUNPOD_API_KEY from the environment, else ~/.runpod/config.toml.

    RFD 1140's trap: a bare top-level `apikey` outside any `[default]` section makes `runpodctl` report a
    missing profile; we read it anyway and say so.
    """
    env = os.environ if env is None else env
    if env.get("RUNPOD_API_KEY"):
        return ApiKey(env["RUNPOD_API_KEY"], "environment (RUNPOD_API_KEY)")
    shown = Path(config_path or CONFIG_TOML)  # as the user knows it: ~/.runpod/config.toml
    path = shown.expanduser()
    how = f'set RUNPOD_API_KEY, or write it to {shown} as [default] apikey = "..."'
    if not path.is_file():
        raise RunPodError(f"no RunPod API key: {how} ({path} does not exist)")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise RunPodError(f"{path} is not valid TOML: {err}") from None
    section = data.get("default")
    if isinstance(section, dict) and section.get("apikey"):
        return ApiKey(str(section["apikey"]), f"{path} [default]")
    if isinstance(data.get("apikey"), str) and data["apikey"]:
        return ApiKey(
            data["apikey"],
            f"{path} (top level)",
            note=(
                f"{path}: the apikey is at the top level, outside a [default] section. fourloops reads it, "
                "but runpodctl does not (it reports a missing default profile, RFD 1140). Move it under "
                "[default] to make both agree."
            ),
        )
    raise RunPodError(f"no RunPod API key: {how} ({path} has no apikey)")


class Client:
    """The few v2 calls fourloops needs. Each method returns decoded JSON (None for 204)."""

    def __init__(self, api_key: str, base_url: str | None = None, timeout: float = 30.0):
        self._key = api_key
        self.base_url = (base_url or os.environ.get("FOURLOOPS_RUNPOD_API") or DEFAULT_BASE_URL).rstrip("/")
        self.timeout = timeout

    def _request(self, method: str, path: str, body=None, query: dict | None = None, retries: int = 3):
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self._key}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(retries + 1):
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
                    return json.loads(raw) if raw else None
            except urllib.error.HTTPError as err:
                raw = err.read().decode(errors="replace")
                try:
                    problem = json.loads(raw)
                    detail = str(problem.get("detail", raw))
                except ValueError:
                    detail = raw
                if (err.code == 429 or err.code >= 502) and attempt < retries:
                    time.sleep(float(err.headers.get("Retry-After") or 1.0 * (attempt + 1)))
                    continue
                raise RunPodError(f"{method} {path}: HTTP {err.code}: {detail}", err.code, detail) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
                if attempt < retries:
                    time.sleep(1.0 * (attempt + 1))
                    continue
                raise RunPodError(f"{method} {path}: {err}") from None

    # pods
    def list_pods(self) -> list[dict]:
        return self._request("GET", "/v2/pods")["pods"]

    def get_pod(self, pod_id: str) -> dict | None:
        try:
            return self._request("GET", f"/v2/pods/{urllib.parse.quote(pod_id)}")
        except RunPodError as err:
            if err.status == 404:
                return None
            raise

    def create_pod(self, body: dict) -> dict:
        return self._request("POST", "/v2/pods", body, retries=0)

    def terminate(self, pod_id: str) -> None:
        """POST /v2/pods/{id}/action terminate; an already-gone pod (404) counts as terminated."""
        try:
            self._request("POST", f"/v2/pods/{urllib.parse.quote(pod_id)}/action", {"action": "terminate"})
        except RunPodError as err:
            if err.status != 404:
                raise

    # billing
    def pod_billing(self, pod_id: str, since: dt.datetime) -> float:
        """Total billed to `pod_id` since `since` (USD), from GET /v2/billing/pods."""
        start = since.astimezone(dt.timezone.utc).replace(minute=0, second=0, microsecond=0)
        out = self._request(
            "GET", "/v2/billing/pods",
            query={"podId": pod_id, "bucketSize": "hour", "startTime": start.strftime("%Y-%m-%dT%H:%M:%SZ")},
        )
        return float(out["metadata"]["totals"]["totalAmount"])


def parse_time(text) -> dt.datetime | None:
    """An RFC 3339 timestamp of the API (`createdAt`), or None when absent or unreadable."""
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def is_no_instances(err: RunPodError) -> bool:
    """POST /v2/pods answers 400 (v1: 500) "There are no instances currently available" for no capacity."""
    return err.status in (400, 500) and NO_INSTANCES in (err.detail or str(err)).lower()


def create_with_fallback(client: Client, body: dict, gpu_ids: list[str], cloud_types: list[str], log=print) -> dict:
    """Try each cloud type (SECURE first) with each GPU type in order; return the created pod.

    Only "no instances" moves on to the next candidate; any other error stops at once. When every
    candidate is exhausted, NoInstancesError names what was tried.
    """
    tried = []
    for cloud in cloud_types:
        for gpu in gpu_ids:
            attempt = dict(body, cloud=cloud, gpu={"id": gpu, "count": 1})
            try:
                pod = client.create_pod(attempt)
            except RunPodError as err:
                if is_no_instances(err):
                    tried.append(f"{gpu} ({cloud})")
                    log(f"runpod: no instances of {gpu} in {cloud}; trying the next candidate")
                    continue
                raise
            if tried:
                log(f"runpod: placed on {gpu} ({cloud}) after: {', '.join(tried)}")
            return pod
    raise NoInstancesError(
        "RunPod has no instances available for any candidate: " + ", ".join(tried)
        + ". Widen pod.gpu_classes / pod.runpod.widen_gpus or pod.runpod.cloud_types in config/machines.yaml, or retry later."
    )


def direct_ssh(pod: dict) -> tuple[str, int, str] | None:
    """(host, port, user) of the pod's direct TCP sshd, or None. Never the ssh.runpod.io proxy."""
    runtime = pod.get("runtime")
    if pod.get("status") != "RUNNING" or not runtime:
        return None  # RUNNING with a null runtime is a pod with no container (RFD 1140)
    direct = (pod.get("ssh") or {}).get("direct")
    if direct and direct.get("host") and direct.get("port"):
        return direct["host"], int(direct["port"]), direct.get("username") or "root"
    for port in runtime.get("ports") or []:
        if port.get("private") == 22 and port.get("public") and port.get("ip"):
            return port["ip"], int(port["public"]), "root"
    return None


def describe(pod: dict | None) -> str:
    if pod is None:
        return "pod not found"
    runtime = pod.get("runtime")
    direct = (pod.get("ssh") or {}).get("direct")
    return (
        f"status={pod.get('status')} runtime={'null' if runtime is None else 'up ' + str(runtime.get('uptime'))+'s'} "
        f"ssh.direct={'null' if not direct else str(direct.get('host')) + ':' + str(direct.get('port'))}"
    )


@dataclass
class Teardown:
    pod_id: str
    gone_from_list: bool
    billing_stopped: bool
    cost_usd: float | None
    seconds: float

    @property
    def verified(self) -> bool:
        return self.gone_from_list and self.billing_stopped


def terminate_verified(
    client: Client, pod_id: str, since: dt.datetime, timeout_s: float = 120.0, poll_s: float = 2.0
) -> Teardown:
    """Terminate, then check two surfaces: the pod is gone from GET /v2/pods, and its billing total
    stops growing (two reads `poll_s` apart, both after it left the list, agree)."""
    t0 = time.monotonic()
    client.terminate(pod_id)
    gone = False
    stopped = False
    last = None
    cost = None
    while time.monotonic() - t0 < timeout_s:
        if not gone:
            gone = all(p.get("id") != pod_id for p in client.list_pods())
        if gone:
            try:
                cost = client.pod_billing(pod_id, since)
            except RunPodError:
                cost = None
            if cost is not None and last is not None and abs(cost - last) < 1e-9:
                stopped = True
                break
            last = cost
        time.sleep(poll_s)
    return Teardown(pod_id, gone, stopped, cost, time.monotonic() - t0)
