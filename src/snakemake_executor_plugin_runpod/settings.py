"""The executor's settings: `ExecutorSettings` (the `--runpod-*` flags) and `PodSpec` (the pod to create).

Precedence, for each setting: a `--runpod-*` flag given on the command line, else its key in
config/machines.yaml's `pod.runpod` section (named by the field's `machines_key`), else the field's
default. The pod itself (image, GPU types, cloud types, disk, ports, environment) comes only from
machines.yaml. Every value is checked, wherever it came from; a bad one is refused naming the flag or
the key, the value and what is allowed.
"""

import math
import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Optional

from snakemake_interface_common.exceptions import ApiError
from snakemake_interface_executor_plugins.settings import ExecutorSettingsBase

from fourloops import machines
from fourloops.runpod import DEFAULT_BASE_URL

CLOUD_TYPES = ("SECURE", "COMMUNITY")  # the v2 `Cloud` enum


class SettingsError(ApiError):
    """A bad setting, machines.yaml entry or missing credential. Snakemake prints an ApiError as one
    `Error: ...` line, without a traceback: the message is all the user needs."""


def _setting(default=None, *, help: str, allowed: str, check, machines_key: str | None = None, factory=None):
    if factory is None and default is not None:
        help += f" Default: {default}"
        help += f", unless machines.yaml sets pod.runpod.{machines_key}." if machines_key else "."
    meta = {"help": help, "allowed": allowed, "check": check, "machines_key": machines_key}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _positive(v) -> bool:
    return v > 0


def _remember_given(cls):
    """Record which settings the caller passed: Snakemake passes only the flags given on the command line,
    so those are the ones that beat machines.yaml."""
    init = cls.__init__

    def __init__(self, **given):
        self.given = frozenset(given)
        init(self, **given)

    __init__.__doc__ = init.__doc__
    cls.__init__ = __init__
    return cls


@_remember_given
@dataclass
class ExecutorSettings(ExecutorSettingsBase):
    api_url: str = _setting(
        help="RunPod REST v2 base URL (default $FOURLOOPS_RUNPOD_API, else https://api.runpod.io).",
        allowed="an http:// or https:// URL", check=lambda v: re.match(r"^https?://[^/\s]+", v) is not None,
        factory=lambda: os.environ.get("FOURLOOPS_RUNPOD_API") or DEFAULT_BASE_URL,
    )
    machines: Optional[Path] = _setting(
        None, help="machines file with the pod section (default <workflow>/config/machines.yaml).",
        allowed="an existing file", check=lambda v: v is None or Path(v).is_file(),
    )
    remote_python: str = _setting(
        "{workspace}/fourloops/venv/bin/python", machines_key="python",
        help="python on the pod that runs Snakemake ({workspace}, {root}, {repo} expand).",
        allowed="a non-empty command", check=lambda v: bool(v.strip()),
    )
    setup_command: str = _setting(
        "true", machines_key="setup",
        help="command run once per pod after the sources are synced.",
        allowed="a non-empty command", check=lambda v: bool(v.strip()),
    )
    fetch_command: str = _setting(
        "", machines_key="fetch",
        help="command started once per pod (see --runpod-fetch-at), downloading the weights the run's pod jobs "
             "load ({models}: one model's hub repo as `ID --revision COMMIT`, the command run once per model and repo; "
             "{workspace}, {root} expand); each pod job waits for its model's; empty: the "
             "first job downloads them.",
        allowed="a command (or empty) without {repo} (the workflow's files are not on the pod when it starts)",
        check=lambda v: "{repo}" not in v,
    )
    fetch_at: str = _setting(
        "container", machines_key="fetch_at",
        help="when the fetch command starts: `container`, from the pod's start command (its v2 `args`) as the "
             "container starts, before ssh answers, then the image's own start (--runpod-image-start); `sync`, "
             "over ssh once the workflow's files are synced, beside the setup.",
        allowed="container or sync", check=lambda v: v in ("container", "sync"),
    )
    image_start: str = _setting(
        "/start.sh", machines_key="image_start",
        help="the image's own start command, which the pod's start command execs after starting the fetch "
             "(runpod/base: /start.sh starts sshd with PUBLIC_KEY and the RunPod agent's plumbing).",
        allowed="a non-empty command", check=lambda v: bool(v.strip()),
    )
    dfc_python: str = _setting(
        "python3.10", machines_key="dfc_python",
        help="python on the pod that creates the Dataflow Compiler's own venv for `container` jobs (the DFC's Python: "
             "3.10 for DFC 5.x; {workspace}, {root}, {repo} expand).",
        allowed="a non-empty command", check=lambda v: bool(v.strip()),
    )
    ready_timeout_s: float = _setting(
        600.0, machines_key="ready_timeout_s",
        help="terminate a pod not ready within this many seconds.",
        allowed="a number of seconds > 0", check=_positive,
    )
    idle_teardown_s: float = _setting(
        300.0, machines_key="idle_teardown_s",
        help="tear an idle pod down after this many seconds.",
        allowed="a number of seconds >= 0", check=lambda v: v >= 0,
    )
    pool_size: int = _setting(
        1, machines_key="pool_size",
        help="at most this many pods at once, one job each.",
        allowed="an integer >= 1", check=lambda v: v >= 1,
    )
    poll_s: float = _setting(
        5.0, machines_key="poll_s",
        help="seconds between API polls while waiting.",
        allowed="a number of seconds > 0", check=_positive,
    )
    teardown_timeout_s: float = _setting(
        120.0, machines_key="teardown_timeout_s",
        help="after terminate, wait this long for the pod list and billing to confirm.",
        allowed="a number of seconds > 0", check=_positive,
    )
    name_prefix: str = _setting(
        "fourloops", machines_key="name_prefix",
        help="pods are named <prefix>-<run id>-N; `fourloops pods reap` looks for this prefix.",
        allowed="letters, digits and dashes", check=lambda v: re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*", v) is not None,
    )

    def __post_init__(self):
        for f in fields(self):
            check_value(f, getattr(self, f.name), flag(f.name))

    def with_machines(self, runpod_section: dict, path: Path) -> "ExecutorSettings":
        """These settings with machines.yaml's `pod.runpod` values for those not given on the command line."""
        from_file = {}
        for f in fields(self):
            key = f.metadata.get("machines_key")
            if key and key in runpod_section and f.name not in self.given:
                from_file[f.name] = check_value(f, runpod_section[key], f"{path}: pod.runpod.{key}")
        return replace(self, **from_file)


def flag(name: str) -> str:
    return "--runpod-" + name.replace("_", "-")


def check_value(f, value, source: str):
    """`value` for setting `f`, converted to its type; SettingsError naming `source` when it is not allowed."""
    allowed = f.metadata["allowed"]
    want = f.type
    bad = SettingsError(f"{source} = {value!r} is not allowed: expected {allowed}")
    if f.name == "machines":
        if value is not None and not Path(value).is_file():
            raise SettingsError(f"{source} = {str(value)!r}: no such file; expected {allowed}")
        return value
    if isinstance(value, bool):
        raise bad
    if want is int:
        if not isinstance(value, int):
            raise bad
    elif want is float:
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise bad
        value = float(value)
    elif not isinstance(value, str):
        raise bad
    if not f.metadata["check"](value):
        raise bad
    return value


@dataclass(frozen=True)
class PodSpec:
    """The pod to create, from machines.yaml's `pod:` section."""

    image: str
    gpus: tuple[str, ...]
    cloud_types: tuple[str, ...]
    disk_gb: int
    ports: tuple[str, ...]
    pod_env: tuple[str, ...]  # desk variables copied into the pod's own environment, when set

    @classmethod
    def from_machines(cls, pod: dict, path: Path) -> "PodSpec":
        rp = pod.get("runpod") or {}
        if not isinstance(rp, dict):
            raise SettingsError(f"{path}: pod.runpod = {rp!r}: expected a mapping of settings")
        where = f"{path}: pod.runpod"

        def strings(key, value, allowed, check=lambda s: True):
            if not isinstance(value, list) or not all(isinstance(s, str) and check(s) for s in value):
                raise SettingsError(f"{where}.{key} = {value!r} is not allowed: expected {allowed}")
            return tuple(value)

        image = rp.get("image")
        if not isinstance(image, str) or not re.search(r"@sha256:[0-9a-f]{64}$", image):
            raise SettingsError(f"{where}.image = {image!r} is not allowed: expected an image pinned by digest "
                                "(name@sha256:<64 hex digits>)")
        classes = pod.get("gpu_classes")
        if not isinstance(classes, list) or not all(isinstance(g, dict) and isinstance(g.get("id"), str) for g in classes):
            raise SettingsError(f"{path}: pod.gpu_classes = {classes!r} is not allowed: expected a list of {{id: <GPU type>, ...}}")
        strings("widen_gpus", rp.get("widen_gpus") or [], "a list of GPU type ids")
        gpus = machines.pod_gpus(pod)
        if not gpus:
            raise SettingsError(f"{path}: pod.gpu_classes and pod.runpod.widen_gpus list no GPU type: expected at least one")
        clouds = strings("cloud_types", rp.get("cloud_types", list(CLOUD_TYPES)),
                         f"a non-empty list of {', '.join(CLOUD_TYPES)}", lambda s: s in CLOUD_TYPES)
        if not clouds:
            raise SettingsError(f"{where}.cloud_types = []: expected a non-empty list of {', '.join(CLOUD_TYPES)}")
        disk = rp.get("container_disk_gb", pod.get("container_disk_gb", 150))
        if isinstance(disk, bool) or not isinstance(disk, int) or disk < 1:
            raise SettingsError(f"{where}.container_disk_gb = {disk!r} is not allowed: expected an integer number of GB >= 1")
        ports = strings("ports", rp.get("ports", ["22/tcp"]), 'a list of "<port>/tcp" or "<port>/http" including "22/tcp"',
                        lambda s: re.fullmatch(r"\d{1,5}/(tcp|http)", s) is not None)
        if "22/tcp" not in ports:  # ssh.direct needs it
            raise SettingsError(f'{where}.ports = {list(ports)!r}: expected "22/tcp" among them (direct ssh)')
        pod_env = strings("pod_env", rp.get("pod_env", ["HF_TOKEN"]), "a list of environment variable names",
                          lambda s: re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", s) is not None)
        return cls(image, gpus, clouds, disk, ports, pod_env)


@dataclass(frozen=True)
class Config:
    settings: ExecutorSettings   # effective: flags > machines.yaml > defaults
    pod: PodSpec
    machines: dict               # the whole machines file (placement of profile tags)
    path: Path


def load(settings: ExecutorSettings, basedir: Path) -> Config:
    """The executor's configuration from `settings` and the machines file."""
    path = Path(settings.machines) if settings.machines else Path(basedir) / "config" / "machines.yaml"
    try:
        data = machines.load(path)
        machines.machine(data, "pod")
    except machines.MachinesError as err:
        raise SettingsError(f"runpod: {err}") from None
    pod = data["pod"]
    rp = pod.get("runpod") or {}
    spec = PodSpec.from_machines(pod, path)
    return Config(settings.with_machines(rp, path), spec, data, path)
