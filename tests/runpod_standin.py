"""A RunPod REST v2 stand-in for tests: every request (and every answer) is validated against the
project's contract with the v2 API (tests/runpod_v2_contract.yaml, written from the published v2
document), and pods behave the way the seeds saw real ones behave:

- POST /v2/pods answers 400 "There are no instances currently available" for a (GPU, cloud) pair that is
  not in `available` (RFD 1140; v2 uses 400 for capacity, see the createPod description);
- a new pod is PROVISIONING, then RUNNING with `runtime: null` for `runtime_null_s` (RFD 1140: the REST view
  looked healthy while nothing ran), then has a runtime and `ssh.direct`, and its sshd accepts the pod's
  PUBLIC_KEY only `ssh_delay_s` later;
- a pod created with `args` (its start command) runs them as its container when the null runtime ends, in the
  pod's env; its runtime appears only once they hand over to the image's own start (`image_start`, a script
  this stand-in writes): RFD 1140, a start command does not stand in for the agent;
- terminate: the pod leaves the list after `terminate_delay_s`, its billing stops accruing
  `billing_lag_s` after that, and its processes die (the container is gone).

A pod's life can follow config/pod_life.yaml (`life=`, a fourloops.podbill.PodLife) scaled in time by
`time_scale` (0.01: a simulated minute lasts 0.6 s): PROVISIONING for the image pull, RUNNING with a null
runtime, then a stale ssh port, all billed from creation. The stand-in's clock (`sim_s`) and bill
(`billed_s`, `cost`) are in simulated seconds. On the pod, tests/podwork.py plays the setup, the weights
download and a job's time, and the pod's `rsync` (a shell shim) pod_life's bandwidth, at the same scale and
records each as an event (`events`), so a test reads where every billed second went from the stand-in, never
from wall time.

"The pod" is a real loopback sshd on 127.0.0.1 (start_sshd): the pod's PUBLIC_KEY goes into the sshd's
authorized_keys with environment="FOURLOOPS_WORKSPACE=<pod root>" plus the pod's env (HF_TOKEN), so each
pod's jobs run in their own tree (/tmp/.../<pod id>/workspace) with this machine's Python.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jsonschema
import referencing
import yaml

CONTRACT_PATH = Path(__file__).resolve().with_name("runpod_v2_contract.yaml")
SPEC_URI = "urn:runpod-v2"
NO_INSTANCES = "There are no instances currently available"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the loopback sshd ----------------------------------------------------------------------------
class Sshd:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.authorized_keys = self.root / "authorized_keys"
        self.authorized_keys.write_text("")
        self.lock = threading.Lock()
        hostkey = self.root / "host_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hostkey)], check=True)
        self.config = self.root / "sshd_config"
        self.config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {hostkey}\nPidFile {self.root / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {self.authorized_keys}\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nStrictModes no\nUsePAM no\n"
            "PermitUserEnvironment yes\nMaxStartups 50\nMaxSessions 50\n"
            "Subsystem sftp /usr/lib/openssh/sftp-server\n"
        )
        try:
            Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation dir (as root)
        except OSError:
            pass  # a non-root sshd only lets its own user in, which is all the tests need
        self.proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-f", str(self.config), "-E", str(self.root / "sshd.log")])
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"sshd did not start: {(self.root / 'sshd.log').read_text()}")

    def allow(self, tag: str, pubkey: str, env: dict) -> None:
        opts = ",".join(f'environment="{k}={v}"' for k, v in env.items())
        with self.lock:
            with open(self.authorized_keys, "a") as f:
                f.write(f"{opts} {pubkey.strip()} standin:{tag}\n")

    def revoke(self, tag: str) -> None:
        with self.lock:
            lines = self.authorized_keys.read_text().splitlines(keepends=True)
            self.authorized_keys.write_text("".join(l for l in lines if not l.rstrip().endswith(f"standin:{tag}")))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def kill_processes_with_env(var: str, value: str) -> int:
    """SIGKILL every process whose environment has var=value (a pod's sessions and jobs)."""
    needle = f"{var}={value}".encode()
    killed = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle in env:
            try:
                os.kill(int(pid), signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


# --- the API ---------------------------------------------------------------------------------------
class Spec:
    """The contract (an OpenAPI 3.1 document): which operation a request is, and what it and its answer
    must look like. `check_request` / `check_response` return the violations, empty when none."""

    def __init__(self, path: Path = CONTRACT_PATH):
        self.doc = yaml.safe_load(Path(path).read_text())
        resource = referencing.Resource.from_contents(self.doc, default_specification=referencing.jsonschema.DRAFT202012)
        self.registry = referencing.Registry().with_resource(SPEC_URI, resource)
        self.routes = []
        for template, ops in self.doc["paths"].items():
            regex = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "$"
            self.routes.append((re.compile(regex), template, ops))
        # literal paths before templated ones (/v2/registries/delegations vs /v2/registries/{id})
        self.routes.sort(key=lambda r: r[1].count("{"))

    def validator(self, schema: dict):
        return jsonschema.Draft202012Validator(schema, registry=self.registry)

    def resolve(self, obj: dict) -> dict:
        while "$ref" in obj:
            ptr = obj["$ref"].lstrip("#/").split("/")
            obj = self.doc
            for part in ptr:
                obj = obj[part]
        return obj

    def ref(self, pointer: str) -> dict:
        return {"$ref": f"{SPEC_URI}#{pointer}"}

    def match(self, method: str, path: str):
        for regex, template, ops in self.routes:
            m = regex.match(path)
            if m and method.lower() in ops:
                return template, ops, m.groupdict()
        return None

    def check_request(self, method, path, query: dict, body, headers) -> list[str]:
        found = self.match(method, path)
        if not found:
            return [f"{method} {path}: no such operation in the v2 contract"]
        template, ops, _ = found
        op = ops[method.lower()]
        errors = []
        if not (headers.get("Authorization") or "").startswith("Bearer "):
            errors.append("missing bearer token")
        params = [self.resolve(p) for p in ops.get("parameters", []) + op.get("parameters", [])]
        known = {p["name"] for p in params if p["in"] == "query"}
        for name in query:
            if name not in known:
                errors.append(f"query parameter {name!r} is not in the contract for {method} {template}")
        for p in params:
            if p["in"] != "query":
                continue
            if p.get("required") and p["name"] not in query:
                errors.append(f"missing required query parameter {p['name']}")
            if p["name"] in query:
                value = query[p["name"]]
                schema = p.get("schema", {})
                st = self.resolve(schema).get("type") if "$ref" in schema else schema.get("type")
                if st == "integer":
                    try:
                        value = int(value)
                    except ValueError:
                        pass
                elif st == "boolean":
                    value = {"true": True, "false": False}.get(value, value)
                schema = {"$ref": SPEC_URI + schema["$ref"]} if "$ref" in schema else schema
                for e in self.validator(schema).iter_errors(value):
                    errors.append(f"query {p['name']}: {e.message}")
                if self.resolve(p.get("schema", {})).get("format") == "date-time":
                    try:
                        dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
                    except ValueError:
                        errors.append(f"query {p['name']}: not RFC 3339: {value!r}")
        rb = op.get("requestBody")
        if rb:
            rb = self.resolve(rb)
            if body is None:
                if rb.get("required"):
                    errors.append("missing request body")
            else:
                schema = rb["content"]["application/json"]["schema"]
                for e in self.validator(self.ref(schema["$ref"][1:]) if "$ref" in schema else schema).iter_errors(body):
                    errors.append(f"body {e.json_path}: {e.message}")
        elif body is not None:
            errors.append(f"{method} {template} takes no request body")
        return errors

    def check_response(self, method, path, status: int, body) -> list[str]:
        template, ops, _ = self.match(method, path)
        responses = ops[method.lower()]["responses"]
        resp = responses.get(str(status)) or responses.get("default")
        if resp is None:
            return [f"status {status} is not a documented response of {method} {template}"]
        resp = self.resolve(resp)
        content = resp.get("content")
        if not content:
            return [] if body is None else [f"{status} of {method} {template} has no body in the contract"]
        schema = next(iter(content.values()))["schema"]
        v = self.validator(self.ref(schema["$ref"][1:]) if "$ref" in schema else schema)
        return [f"response {e.json_path}: {e.message}" for e in v.iter_errors(body)]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _iso(t: dt.datetime | None) -> str | None:
    return None if t is None else t.strftime("%Y-%m-%dT%H:%M:%SZ")


class StandIn:
    """The stand-in's state and knobs; `url` is the base URL to give the client."""

    PRICES = {"SECURE": 0.84, "COMMUNITY": 0.74}

    def __init__(self, sshd: Sshd | None, pods_root: Path, api_key: str, *, available=None,
                 runtime_null_s: float = 2.0, ssh_delay_s: float = 1.0, provisioning_s: float = 0.5,
                 terminate_delay_s: float = 0.5, billing_lag_s: float = 1.0, price_scale: float = 1.0,
                 life=None, time_scale: float = 1.0):
        self.sshd = sshd
        self.pods_root = Path(pods_root)
        self.api_key = api_key
        self.available = available  # None: everything; else a set of (gpu id, cloud)
        self.runtime_null_s = runtime_null_s
        self.ssh_delay_s = ssh_delay_s
        self.provisioning_s = provisioning_s
        self.terminate_delay_s = terminate_delay_s
        self.billing_lag_s = billing_lag_s
        self.price_scale = price_scale
        self.time_scale = time_scale
        self.life = life
        if life is not None:  # the pod's life from config/pod_life.yaml, in scaled time
            self.provisioning_s = life.pull_s * time_scale
            self.runtime_null_s = life.runtime_null_s * time_scale
            self.ssh_delay_s = life.ssh_stale_s * time_scale
            self.billing_lag_s = 0.0
        self.spec = Spec()
        # the image's own start: the agent reports the container (a runtime), then it lives until terminate
        self.image_start = self.pods_root / "image-start.sh"
        self.pods_root.mkdir(parents=True, exist_ok=True)
        self.image_start.write_text('#!/bin/sh\ntouch "$FOURLOOPS_STANDIN_AGENT"\nexec sleep 86400\n')
        self.image_start.chmod(0o755)
        self.pods: dict[str, dict] = {}
        self.requests: list[tuple[str, str, dict | None]] = []
        self.violations: list[str] = []
        self.create_attempts: list[tuple[str, str]] = []
        self.lock = threading.RLock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self._ticker_stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick_loop, daemon=True)
        self._ticker.start()

    def close(self) -> None:
        self._ticker_stop.set()
        self.server.shutdown()
        self.server.server_close()
        for pid in list(self.pods):
            self._container_gone(self.pods[pid])

    # pod model ---------------------------------------------------------------------------------
    def _tick_loop(self):
        while not self._ticker_stop.wait(0.01):  # 1/100 s: at 1/50 time half a simulated second
            self.tick()

    def tick(self) -> None:
        now = time.monotonic()
        with self.lock:
            for p in list(self.pods.values()):
                age = now - p["t0"]
                if p["terminated_at"] is not None:
                    if now - p["terminated_at"] >= self.terminate_delay_s:
                        p["listed"] = False
                    continue
                if age < self.provisioning_s:
                    p["status"] = "PROVISIONING"
                else:
                    p["status"] = "RUNNING"
                    if p["started_at"] is None:
                        p["started_at"] = _now()
                if age >= self.provisioning_s + self.runtime_null_s and p["runtime_since"] is None:
                    if not p["body"].get("args"):  # the image's own start
                        p["runtime_since"] = now
                    elif p["container"] is None:
                        p["container"] = self._start_container(p)
                        p["container_t0"] = now
                    elif (p["workspace"].parent / "agent").exists():  # handed over to the image's start
                        p["runtime_since"] = p["container_t0"]
                if (p["runtime_since"] is not None and not p["ssh_enabled"] and not p["ssh_dead"]
                        and now - p["runtime_since"] >= self.ssh_delay_s):
                    p["ssh_enabled"] = True
                    if self.sshd and p["env"].get("PUBLIC_KEY"):
                        env = {k: v for k, v in self._pod_env(p).items() if k != "PUBLIC_KEY"}
                        self.sshd.allow(p["id"], p["env"]["PUBLIC_KEY"], env)

    def _pod_env(self, p: dict) -> dict:
        """What the pod's processes (its container, its ssh sessions) see: the pod's env and the stand-in's."""
        env = dict(p["env"])
        env["FOURLOOPS_WORKSPACE"] = str(p["workspace"])
        # the pod's own home: this machine's ~/.bashrc (pyenv init, which takes a lock that a killed session
        # leaves behind) is not the pod's
        env["HOME"] = str(p["workspace"].parent / "home")
        env["FOURLOOPS_STANDIN_SCALE"] = repr(self.time_scale)  # tests/podwork.py's clock
        env["FOURLOOPS_STANDIN_EVENTS"] = str(p["workspace"].parent / "events.jsonl")
        env["FOURLOOPS_STANDIN_AGENT"] = str(p["workspace"].parent / "agent")
        if self.life is not None:  # the pod's rsync moves at pod_life's rsync_mb_s, scaled
            env["PATH"] = f"{self._rsync_shim(p)}:/usr/local/bin:/usr/bin:/bin"
        return env

    def _start_container(self, p: dict) -> subprocess.Popen:
        """The pod's start command (`args`, split as a shell would), as the container's first process."""
        with open(p["workspace"].parent / "container.log", "ab") as log:
            return subprocess.Popen(shlex.split(p["body"]["args"]), env=self._pod_env(p), cwd=p["workspace"],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)

    def _rsync_shim(self, p: dict) -> Path:
        """A directory whose `rsync` is the real one, then the rest of the bytes' time at pod_life's rsync_mb_s
        (scaled), recorded as a `transfer` event from the shim's start. A shell script: a Python start on every
        rsync would be seconds the stand-in adds that a real pod's rsync does not take."""
        bin_dir = p["workspace"].parent / "bin"
        bin_dir.mkdir(exist_ok=True)
        shim = bin_dir / "rsync"
        per_byte = self.time_scale / (self.life.rsync_mb_s * 1e6)  # real seconds a byte takes at the scaled bandwidth
        shim.write_text(
            "#!/bin/bash\n"
            "t0=$(date +%s.%N); log=$(mktemp --suffix=.rsync.log)\n"
            '/usr/bin/rsync --log-file="$log" --log-file-format=%l "$@"; rc=$?\n'
            # a file's line is "<date> <time> [pid] <length>"; the summary lines carry words
            "bytes=$(awk '{x=$0; sub(/.*\\] /, \"\", x); if (x ~ /^[0-9]+$/) s+=x} END {print s+0}' \"$log\"); rm -f \"$log\"\n"
            f"left=$(awk -v b=\"$bytes\" -v t0=\"$t0\" -v now=\"$(date +%s.%N)\" 'BEGIN {{l=b*{per_byte!r}-(now-t0); print (l>0?l:0)}}')\n"
            'sleep "$left"\n'
            'printf \'{"cause": "transfer", "t0": %s, "t1": %s, "bytes": %s, "rc": %s}\\n\' "$t0" "$(date +%s.%N)" "$bytes" "$rc" '
            '>> "$FOURLOOPS_STANDIN_EVENTS"\n'
            'exit $rc\n')
        shim.chmod(0o755)
        return bin_dir

    def _container_gone(self, p: dict) -> None:
        if self.sshd:
            self.sshd.revoke(p["id"])
        kill_processes_with_env("FOURLOOPS_WORKSPACE", str(p["workspace"]))

    def kill_ssh(self, pod_id: str) -> int:
        """Fault: the pod's sshd dies (sessions killed, no new logins); the pod stays RUNNING and billing."""
        with self.lock:
            p = self.pods[pod_id]
            p["ssh_dead"] = True
        if self.sshd:
            self.sshd.revoke(pod_id)
        return kill_processes_with_env("FOURLOOPS_WORKSPACE", str(p["workspace"]))

    def sim_s(self, p: dict, real: float | None = None) -> float:
        """The stand-in's clock: simulated seconds since pod `p` was created (billing starts there)."""
        return ((time.monotonic() if real is None else real) - p["t0"]) / self.time_scale

    def billed_s(self, p: dict) -> float:
        """Simulated seconds pod `p` has billed: from creation to its terminate (+ billing lag)."""
        end = time.monotonic()
        if p["terminated_at"] is not None:
            end = min(end, p["terminated_at"] + self.billing_lag_s)
        return max(0.0, self.sim_s(p, end))

    def cost(self, p: dict) -> float:
        return self.billed_s(p) / 3600.0 * p["price"] * self.price_scale

    def events(self, p: dict) -> list[tuple[str, float, float]]:
        """(cause, start, end) in simulated seconds since creation: the pull, the null runtime and stale ssh
        this stand-in played, and what tests/podwork.py recorded on the pod (setup, download, job)."""
        out = []
        if self.life is not None:
            pull = self.provisioning_s / self.time_scale
            out += [("pull", 0.0, pull), ("ready", pull, pull + self.life.ready_s)]
        log = p["workspace"].parent / "events.jsonl"
        if log.exists():
            for line in log.read_text().splitlines():
                e = json.loads(line)
                out.append((e["cause"], (e["t0"] - p["wall0"]) / self.time_scale, (e["t1"] - p["wall0"]) / self.time_scale))
        return out

    def pod_json(self, p: dict) -> dict:
        running = p["status"] == "RUNNING" and p["runtime_since"] is not None
        direct = None
        if running and self.sshd:
            user = getpass.getuser()
            direct = {"host": "127.0.0.1", "port": self.sshd.port, "username": user,
                      "command": f"ssh {user}@127.0.0.1 -p {self.sshd.port}"}
        runtime = None
        if running:
            runtime = {"uptime": int(time.monotonic() - p["runtime_since"]),
                       "ports": [{"private": 22, "public": self.sshd.port if self.sshd else None, "type": "tcp",
                                  "ip": "127.0.0.1"}]}
        status = p["status"]
        actions = {"PROVISIONING": ["stop", "terminate"], "RUNNING": ["stop", "restart", "terminate"],
                   "TERMINATED": []}.get(status, ["start", "terminate"])
        return {
            "id": p["id"], "name": p["name"], "image": p["image"], "args": p["body"].get("args", ""), "disk": p["disk"],
            "ports": p["ports"], "env": p["env"], "registry": None, "status": status, "actions": actions,
            "mounts": {}, "gpu": {"id": p["gpu"], "count": 1}, "cloud": p["cloud"],
            "dataCenterId": "STANDIN-1" if status != "PROVISIONING" else None,
            "cudaVersion": "13.0", "template": None,
            "ssh": {"proxy": {"host": "ssh.runpod.io", "port": 22, "username": f"{p['id']}-64411eb2",
                              "command": f"ssh {p['id']}-64411eb2@ssh.runpod.io"}, "direct": direct},
            "cost": 0.0 if status == "TERMINATED" else p["price"], "locked": False,
            "globalNetworking": {"enabled": False}, "runtime": runtime,
            "createdAt": _iso(p["created"]), "startedAt": _iso(p["started_at"]),
        }

    def listed(self) -> list[dict]:
        with self.lock:
            return [p for p in self.pods.values() if p["listed"]]

    # HTTP ---------------------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, headers, body_bytes: bytes):
        parsed = urllib.parse.urlsplit(raw_path)
        path = parsed.path
        query = dict(urllib.parse.parse_qsl(parsed.query))
        body = None
        if body_bytes:
            try:
                body = json.loads(body_bytes)
            except ValueError:
                return 400, {"title": "Bad Request", "status": 400, "detail": "body is not JSON"}
        self.requests.append((method, path, body))
        errors = self.spec.check_request(method, path, query, body, headers)
        if errors:
            self.violations.extend(f"{method} {path}: {e}" for e in errors)
            if any("no such operation" in e for e in errors):
                return 404, {"title": "Not Found", "status": 404, "detail": errors[0]}
            return 422, {"title": "Unprocessable Entity", "status": 422, "detail": "request does not match the contract",
                         "errors": errors}
        if headers.get("Authorization") != f"Bearer {self.api_key}":
            return 401, {"title": "Unauthorized", "status": 401, "detail": "invalid bearer token"}
        with self.lock:
            self.tick()
            return self._route(method, path, query, body)

    def _route(self, method, path, query, body):
        m = re.match(r"^/v2/pods/([^/]+)(/action)?$", path)
        if path == "/v2/pods" and method == "GET":
            return 200, {"pods": [self.pod_json(p) for p in self.listed()]}
        if path == "/v2/pods" and method == "POST":
            return self._create(body)
        if m and method == "GET" and not m.group(2):
            p = self.pods.get(m.group(1))
            if not p or not p["listed"]:
                return 404, {"title": "Not Found", "status": 404, "detail": "pod not found"}
            return 200, self.pod_json(p)
        if m and method == "POST" and m.group(2) and body.get("action") == "terminate":
            p = self.pods.get(m.group(1))
            if not p or not p["listed"]:
                return 404, {"title": "Not Found", "status": 404, "detail": "pod not found"}
            if p["terminated_at"] is None:
                p["terminated_at"] = time.monotonic()
                p["status"] = "TERMINATED"
                self._container_gone(p)
            return 204, None
        if path == "/v2/billing/pods" and method == "GET":
            pods = [p for p in self.pods.values() if query.get("podId") in (None, p["id"])]
            start = query.get("startTime") or _iso(_now() - dt.timedelta(days=30))
            end = _iso(_now().replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=1))
            records = []
            total = 0.0
            for p in pods:
                c = self.cost(p)
                total += c
                records.append({"startTime": start, "endTime": end, "podId": p["id"], "totalAmount": c,
                                "gpuAmount": c, "cpuAmount": 0.0, "diskAmount": 0.0})
            return 200, {"records": records, "metadata": {
                "query": {"startTime": start, "endTime": end, "bucketSize": query.get("bucketSize", "day"),
                          "podId": query.get("podId")},
                "recordCount": len(records), "uniquePodCount": len(pods),
                "totals": {"totalAmount": total, "gpuAmount": total, "cpuAmount": 0.0, "diskAmount": 0.0}}}
        return 404, {"title": "Not Found", "status": 404, "detail": f"{method} {path} is not modelled by the stand-in"}

    def _create(self, body):
        gpu = (body.get("gpu") or {}).get("id")
        cloud = body.get("cloud", "SECURE")
        self.create_attempts.append((gpu, cloud))
        if self.available is not None and (gpu, cloud) not in self.available:
            return 400, {"title": "Bad Request", "status": 400, "detail": NO_INSTANCES}
        pid = secrets.token_hex(5)
        workspace = self.pods_root / pid / "workspace"
        workspace.mkdir(parents=True)
        (workspace.parent / "home").mkdir()
        p = {"id": pid, "name": body["name"], "image": body.get("image", ""), "disk": body.get("disk", 20),
             "ports": body.get("ports", []), "env": dict(body.get("env") or {}), "gpu": gpu, "cloud": cloud,
             "price": self.PRICES[cloud], "t0": time.monotonic(), "wall0": time.time(), "created": _now(), "started_at": None,
             "status": "PROVISIONING", "runtime_since": None, "container": None, "container_t0": None, "ssh_enabled": False, "ssh_dead": False,
             "terminated_at": None, "listed": True, "workspace": workspace, "body": body}
        self.pods[pid] = p
        return 201, self.pod_json(p)

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _do(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                try:
                    status, payload = standin.handle(self.command, self.path, self.headers, body)
                except Exception as err:  # a stand-in bug must be loud
                    standin.violations.append(f"stand-in error: {err!r}")
                    status, payload = 500, {"title": "Internal Server Error", "status": 500, "detail": repr(err)}
                if status < 500 and standin.spec.match(self.command, urllib.parse.urlsplit(self.path).path):
                    for e in standin.spec.check_response(self.command, urllib.parse.urlsplit(self.path).path, status, payload):
                        standin.violations.append(f"stand-in answer {self.command} {self.path} {status}: {e}")
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                if data:
                    ctype = "application/json" if status < 400 else "application/problem+json"
                    self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _do

        return Handler


def pod_let_in(standin: "StandIn", api_key: str, name: str, key: Path, known_hosts: Path, timeout: float = 30.0):
    """Create a stand-in pod through the real REST client and wait until the executor's own Transport gets in over
    ssh: (the stand-in's pod record, the executor's Pod with its endpoint, the Transport)."""
    from fourloops import runpod
    from snakemake_executor_plugin_runpod.pool import Pod
    from snakemake_executor_plugin_runpod.transport import Transport

    client = runpod.Client(api_key, standin.url)
    created = client.create_pod({"name": name, "image": "x@sha256:" + "0" * 64,
                                 "gpu": {"id": "NVIDIA A40", "count": 1}, "cloud": "SECURE",
                                 "env": {"PUBLIC_KEY": Path(f"{key}.pub").read_text().strip()}})
    p = standin.pods[created["id"]]
    transport = Transport(key, known_hosts)
    pod = Pod(p["id"], p["name"], dt.datetime.now(dt.timezone.utc))
    deadline = time.time() + timeout
    while time.time() < deadline:
        ep = runpod.direct_ssh(client.get_pod(p["id"]))
        if ep:
            pod.host, pod.port, pod.user = ep
            if transport.ssh(pod, "true", timeout=10).returncode == 0:
                return p, pod, transport
        time.sleep(0.1)
    raise AssertionError(f"the stand-in pod {name} never let us in")
