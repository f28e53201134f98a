"""Snakemake executor plugin: run `pod`-tagged jobs on a rented RunPod pod, everything else locally.

    snakemake --profile profiles/pod results/ladder.csv

How a run goes:
- At start the executor makes every rule that is not tagged `resources: profile="pod"` (or
  `"container"` when pod.runpod.dfc_image is set) a local rule, so desk jobs run on this machine.
- The first pod job creates a pod from config/machines.yaml's `pod:` section (GPU types in order,
  SECURE then COMMUNITY on "no instances"), with a per-run ed25519 key as PUBLIC_KEY and HF_TOKEN in the
  pod's own environment. Ready = status RUNNING, runtime not null, ssh.direct set, and `ssh ... true`
  succeeds over direct TCP. Then, once per pod: the workflow's files are rsynced and the setup command
  (the pod environment) runs.
- Per job: rsync the inputs up, run Snakemake's own remote job command (`format_job_exec`) over ssh,
  rsync outputs, logs and benchmarks back (provenance records are outputs here).
- Pods are reused (pool_size, default 1), torn down after `idle_teardown_s` idle and when the run ends
  (normal exit, error, SIGTERM, SIGINT). Teardown is verified through the pod list and billing; the run
  prints the session's cost. `fourloops pods reap` handles the SIGKILL case.

There is no shared filesystem between desk and pod: the executor moves the files itself, while the
local Snakemake keeps its default (shared-fs) bookkeeping of the working directory.
"""


import atexit
import concurrent.futures
import datetime as dt
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncGenerator, List, Optional

import yaml
from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo
from snakemake_interface_executor_plugins.executors.real import RealExecutor
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface
from snakemake_interface_executor_plugins.settings import CommonSettings, ExecutorSettingsBase

from fourloops import runpod
from fourloops.pods import RunRecord
from fourloops.provenance import redact


@dataclass
class ExecutorSettings(ExecutorSettingsBase):
    api_url: Optional[str] = field(
        default=None,
        metadata={"help": "RunPod REST v2 base URL (default https://api.runpod.io, or $FOURLOOPS_RUNPOD_API)."},
    )
    machines: Optional[str] = field(
        default=None,
        metadata={"help": "machines file with the pod section (default <workflow>/config/machines.yaml)."},
    )
    remote_python: Optional[str] = field(
        default=None,
        metadata={"help": "python on the pod that runs Snakemake (default pod.runpod.python; {workspace} expands)."},
    )
    setup_command: Optional[str] = field(
        default=None,
        metadata={"help": "command run once per pod after the sources are synced (default pod.runpod.setup)."},
    )
    ready_timeout_s: Optional[int] = field(
        default=None, metadata={"help": "terminate a pod not ready within this many seconds (default pod.runpod.ready_timeout_s)."}
    )
    idle_teardown_s: Optional[int] = field(
        default=None, metadata={"help": "tear an idle pod down after this many seconds (default pod.runpod.idle_teardown_s)."}
    )
    pool_size: Optional[int] = field(
        default=None, metadata={"help": "at most this many pods at once (default pod.runpod.pool_size, 1)."}
    )
    poll_s: Optional[float] = field(
        default=None, metadata={"help": "seconds between API polls while waiting (default pod.runpod.poll_s)."}
    )


common_settings = CommonSettings(
    non_local_exec=True,
    implies_no_shared_fs=False,      # the local side keeps its working directory; we move files ourselves
    job_deploy_sources=False,        # sources go up once per pod by rsync, not per job as an archive
    pass_default_storage_provider_args=True,
    pass_default_resources_args=True,
    pass_envvar_declarations_to_cmd=False,  # never put environment values (secrets) on a command line
    auto_deploy_default_storage_provider=False,
    init_seconds_before_status_checks=0,
    can_transfer_local_files=True,
)

SSH_OPTS = [
    "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new", "-o", "ConnectTimeout=10",
    "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR",
    "-o", "IdentitiesOnly=yes",
]


@dataclass
class Pod:
    id: str
    name: str
    created: dt.datetime
    host: str = ""
    port: int = 0
    user: str = "root"
    workspace: str = ""
    busy: bool = False
    healthy: bool = True
    last_used: float = field(default_factory=time.monotonic)
    procs: set = field(default_factory=set)

    @property
    def root(self) -> str:
        return f"{self.workspace.rstrip('/')}/fourloops"


class PodPool:
    """Pods of this run: created lazily, one job per pod at a time, verified teardown."""

    def __init__(self, ex):
        self.ex = ex
        self.pods: list[Pod] = []
        self.creating = 0
        self.cond = threading.Condition()
        self.counter = 0
        self.teardowns: list[runpod.Teardown] = []
        self.closed = False
        self.tearing = 0  # teardowns in flight in other threads (idle / unhealthy pods)

    def acquire(self) -> Pod:
        with self.cond:
            while True:
                if self.closed:
                    raise WorkflowError("the run is shutting down")
                for pod in self.pods:
                    if not pod.busy and pod.healthy:
                        pod.busy = True
                        return pod
                if len(self.pods) + self.creating < self.ex.cfg["pool_size"]:
                    self.creating += 1
                    self.counter += 1
                    n = self.counter
                    break
                self.cond.wait(1.0)
        try:
            pod = self.ex.start_pod(n)
        finally:
            with self.cond:
                self.creating -= 1
                self.cond.notify_all()
        with self.cond:
            pod.busy = True
            self.pods.append(pod)
        return pod

    def release(self, pod: Pod) -> None:
        with self.cond:
            pod.busy = False
            pod.last_used = time.monotonic()
            self.cond.notify_all()
        if not pod.healthy:
            self.discard(pod)

    def discard(self, pod: Pod) -> None:
        with self.cond:
            if pod not in self.pods:
                return
            self.pods.remove(pod)
            self.tearing += 1
        try:
            self.ex.teardown(pod)
        finally:
            with self.cond:
                self.tearing -= 1
                self.cond.notify_all()

    def idle_check(self) -> None:
        limit = self.ex.cfg["idle_teardown_s"]
        with self.cond:
            idle = [p for p in self.pods if not p.busy]
            if not idle or self.creating:
                return
        work_left = self.ex.pod_work_left()
        for pod in idle:
            if time.monotonic() - pod.last_used > limit:
                self.ex.log(f"runpod: {pod.id} idle for more than {limit:.0f} s; tearing it down")
            elif not work_left:
                self.ex.log(f"runpod: no pod jobs left in the DAG; tearing {pod.id} down now")
            else:
                continue
            with self.cond:
                if pod.busy:
                    continue
                pod.healthy = False  # never hand it out again
            self.discard(pod)

    def close(self) -> None:
        with self.cond:
            self.closed = True
            pods = list(self.pods)
            self.pods.clear()
            self.cond.notify_all()
        threads = [threading.Thread(target=self.ex.teardown, args=(p,)) for p in pods]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        deadline = time.monotonic() + self.ex.cfg["teardown_timeout_s"] + 30
        with self.cond:  # never exit while another thread is still tearing a pod down
            while self.tearing and time.monotonic() < deadline:
                self.cond.wait(0.5)


class Executor(RemoteExecutor):
    def __post_init__(self):
        self.settings: ExecutorSettings = self.workflow.executor_settings or ExecutorSettings()
        self.basedir = Path(self.workflow.basedir).resolve()
        self.cfg = self._load_config()
        self.run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        self._make_desk_rules_local()
        key = runpod.read_api_key()
        if key.note:
            self.log(f"runpod: {key.note}", warning=True)
        self.client = runpod.Client(key.value, self.settings.api_url, timeout=30)
        self.record = RunRecord(self.run_id)
        self.record.write()
        self.keydir = Path(tempfile.mkdtemp(prefix=f"fourloops-runpod-{self.run_id}-"))
        self.keyfile = self.keydir / "id_ed25519"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"fourloops-{self.run_id}", "-f", str(self.keyfile)],
            check=True,
        )
        self.pubkey = (self.keydir / "id_ed25519.pub").read_text().strip()
        self.known_hosts = self.keydir / "known_hosts"
        self.pool = PodPool(self)
        self.jobs = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, self.cfg["pool_size"]) * 2)
        self.next_seconds_between_status_checks = 1
        self.last_pod_job_end: float | None = None
        self.last_teardown_verified: float | None = None
        self._done = False
        self._done_lock = threading.Lock()
        self._cancel = threading.Event()
        self._signals_installed = False
        self._fmt_lock = threading.Lock()
        self._stop_heartbeat = threading.Event()
        self._heartbeat = threading.Thread(target=self._heartbeat_loop, daemon=True)
        self._heartbeat.start()
        atexit.register(self._finish)
        self.log(f"runpod: run {self.run_id}: pod jobs go to RunPod ({self.client.base_url}), up to "
                 f"{self.cfg['pool_size']} pod(s) named {self.cfg['name_prefix']}-{self.run_id}-N")

    # configuration ---------------------------------------------------------------------------
    def _load_config(self) -> dict:
        path = Path(self.settings.machines) if self.settings.machines else self.basedir / "config" / "machines.yaml"
        try:
            machines = yaml.safe_load(path.read_text())
            pod = machines["pod"]
            rp = dict(pod.get("runpod") or {})
        except (OSError, KeyError, TypeError, yaml.YAMLError) as err:
            raise WorkflowError(f"runpod: cannot read the pod section of {path}: {err}") from None
        cfg = {
            "image": rp.get("image"),
            "gpus": [g["id"] for g in pod.get("gpu_classes", [])] + list(rp.get("widen_gpus") or []),
            "cloud_types": list(rp.get("cloud_types") or ["SECURE", "COMMUNITY"]),
            "disk": int(rp.get("container_disk_gb") or pod.get("container_disk_gb") or 150),
            "ports": list(rp.get("ports") or ["22/tcp"]),
            "name_prefix": rp.get("name_prefix", "fourloops"),
            "ready_timeout_s": float(rp.get("ready_timeout_s", 600)),
            "idle_teardown_s": float(rp.get("idle_teardown_s", 300)),
            "pool_size": int(rp.get("pool_size", 1)),
            "poll_s": float(rp.get("poll_s", 5)),
            "teardown_timeout_s": float(rp.get("teardown_timeout_s", 120)),
            "python": rp.get("python", "{workspace}/fourloops/venv/bin/python"),
            "setup": rp.get("setup", "true"),
            "dfc_image": rp.get("dfc_image"),
            "pod_env": list(rp.get("pod_env") or ["HF_TOKEN"]),
        }
        for name in ("remote_python", "setup_command", "ready_timeout_s", "idle_teardown_s", "pool_size", "poll_s"):
            value = getattr(self.settings, name)
            if value is not None:
                cfg[{"remote_python": "python", "setup_command": "setup"}.get(name, name)] = value
        if not cfg["image"] or "@sha256:" not in cfg["image"]:
            raise WorkflowError(f"runpod: pod.runpod.image in {path} must be pinned by digest (@sha256:...)")
        if not cfg["gpus"]:
            raise WorkflowError(f"runpod: {path} lists no pod.gpu_classes")
        return cfg

    def _make_desk_rules_local(self) -> None:
        """Rules not tagged for the pod become local rules: Snakemake then runs them on this machine."""
        remote_tags = {"pod"} | ({"container"} if self.cfg["dfc_image"] else set())
        local = []
        for rule in self.workflow.rules:
            tag = rule.resources.get("profile") if hasattr(rule, "resources") else None
            tag = getattr(tag, "raw", tag)  # Snakemake 9 wraps values in Resource("profile", "pod")
            if str(tag) not in remote_tags:
                local.append(rule.name)
        self.workflow.localrules(*local)
        self.local_rule_names = set(local)

    def log(self, msg: str, warning: bool = False) -> None:
        msg = redact(msg)
        (self.logger.warning if warning else self.logger.info)(msg)

    # the job command --------------------------------------------------------------------------
    PY_TOKEN = "__FOURLOOPS_REMOTE_PYTHON__"

    def get_python_executable(self):
        return self.PY_TOKEN  # substituted after the repo path is mapped (the python may live under it)

    def get_snakefile(self):
        return self._to_remote(str(Path(self.workflow.main_snakefile).resolve()))

    def get_job_args(self, job: JobExecutorInterface):
        # No --wait-for-files: those are local paths, and the inputs are already on the pod.
        return RealExecutor.get_job_args(self, job)

    _remote_repo: str = ""

    def _to_remote(self, text: str) -> str:
        return text.replace(str(self.basedir), self._remote_repo) if self._remote_repo else text

    # ssh and rsync ----------------------------------------------------------------------------
    def ssh_cmd(self, pod: Pod) -> list[str]:
        return ["ssh", "-i", str(self.keyfile), "-p", str(pod.port), "-o", f"UserKnownHostsFile={self.known_hosts}",
                *SSH_OPTS, f"{pod.user}@{pod.host}"]

    def ssh(self, pod: Pod, command: str, timeout: float | None = None, track: bool = False):
        proc = subprocess.Popen(self.ssh_cmd(pod) + [command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, stdin=subprocess.DEVNULL)
        if track:
            pod.procs.add(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            return subprocess.CompletedProcess(proc.args, 124, out, err + "\n(timed out)")
        finally:
            pod.procs.discard(proc)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def rsync(self, pod: Pod, files: list[str], src: str, dest: str, timeout: float = 3600):
        """rsync -rt (recursive, keep mtimes: reruns move only what changed) a list of relative paths."""
        if not files:
            return subprocess.CompletedProcess([], 0, "", "")
        rsh = shlex.join(self.ssh_cmd(pod)[:-1])
        cmd = ["rsync", "-rtl", "--no-owner", "--no-group", "--from0", "--files-from=-", "-e", rsh, src, dest]
        return subprocess.run(cmd, input="\0".join(files), capture_output=True, text=True, timeout=timeout)

    def remote(self, pod: Pod, path: str = "") -> str:
        return f"{pod.user}@{pod.host}:{pod.root}/{path}"

    # pod lifecycle ----------------------------------------------------------------------------
    def start_pod(self, n: int) -> Pod:
        name = f"{self.cfg['name_prefix']}-{self.run_id}-{n}"
        # A pod fetches the configured weights once into its HF cache on the container disk (the desk never
        # downloads at run time: fourloops.generate.resolve_model).
        env = {"PUBLIC_KEY": self.pubkey, "FOURLOOPS_FETCH_MODELS": "1"}
        for var in self.cfg["pod_env"]:
            if os.environ.get(var):
                env[var] = os.environ[var]
        body = {"name": name, "image": self.cfg["image"], "disk": self.cfg["disk"], "ports": self.cfg["ports"], "env": env}
        self.log(f"runpod: creating pod {name} ({self.cfg['disk']} GB container disk, no volume, {self.cfg['image']})")
        created = runpod.create_with_fallback(self.client, body, self.cfg["gpus"], self.cfg["cloud_types"], log=self.log)
        pod = Pod(created["id"], name, _parse(created.get("createdAt")) or dt.datetime.now(dt.timezone.utc))
        self.record.add(pod.id, name)
        self.log(f"runpod: pod {pod.id} created ({created.get('gpu', {}).get('id')}, {created.get('cloud')}); waiting for it to be ready")
        try:
            self._wait_ready(pod)
            self._setup(pod)
        except BaseException:
            pod.healthy = False
            self.teardown(pod)
            raise
        return pod

    def _wait_ready(self, pod: Pod) -> None:
        t0 = time.monotonic()
        seen, ssh_err = "nothing yet", ""
        while True:
            if self._cancel.is_set():
                raise WorkflowError("runpod: cancelled while waiting for the pod")
            info = self.client.get_pod(pod.id)
            seen = runpod.describe(info)
            endpoint = runpod.direct_ssh(info) if info else None
            if endpoint:
                pod.host, pod.port, pod.user = endpoint
                probe = self.ssh(pod, "true", timeout=30)
                if probe.returncode == 0:
                    break
                ssh_err = redact(probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else f"exit {probe.returncode}")
            waited = time.monotonic() - t0
            if waited > self.cfg["ready_timeout_s"]:
                raise WorkflowError(
                    f"runpod: pod {pod.id} not ready within {self.cfg['ready_timeout_s']:.0f} s; terminated. "
                    f"Last seen: {seen}" + (f"; last ssh attempt: {ssh_err}" if ssh_err else "")
                )
            time.sleep(self.cfg["poll_s"])
        probe = self.ssh(pod, 'printf %s "${FOURLOOPS_WORKSPACE:-/workspace}"', timeout=30)
        pod.workspace = probe.stdout.strip() or "/workspace"
        self.log(f"runpod: pod {pod.id} ready after {time.monotonic() - t0:.0f} s (ssh {pod.host}:{pod.port}, direct TCP)")

    def _setup(self, pod: Pod) -> None:
        """Once per pod: the workflow's files (tracked + untracked-not-ignored), then the pod environment."""
        t0 = time.monotonic()
        files = self._source_files()
        mk = self.ssh(pod, f"mkdir -p {shlex.quote(pod.root)}/repo {shlex.quote(pod.root)}/work {shlex.quote(pod.root)}/joblogs", timeout=60)
        if mk.returncode != 0:
            raise WorkflowError(f"runpod: cannot prepare {pod.root} on {pod.id}: {redact(mk.stderr)}")
        up = self.rsync(pod, files, str(self.basedir) + "/", self.remote(pod, "repo/"))
        if up.returncode != 0:
            raise WorkflowError(f"runpod: syncing the workflow to {pod.id} failed: {redact(up.stderr[-2000:])}")
        setup = self.cfg["setup"].format(workspace=pod.workspace, root=pod.root, repo=f"{pod.root}/repo")
        done = self.ssh(pod, f"cd {shlex.quote(pod.root)}/repo && ( {setup} ) > ../joblogs/setup.log 2>&1", timeout=3600)
        if done.returncode != 0:
            tail = self.ssh(pod, f"tail -n 30 {shlex.quote(pod.root)}/joblogs/setup.log", timeout=30).stdout
            raise WorkflowError(f"runpod: pod setup failed on {pod.id} (exit {done.returncode}):\n{redact(tail)}")
        self.log(f"runpod: pod {pod.id} set up in {time.monotonic() - t0:.0f} s ({len(files)} workflow files)")

    def _source_files(self) -> list[str]:
        try:
            out = subprocess.run(["git", "-C", str(self.basedir), "ls-files", "-co", "--exclude-standard", "-z"],
                                 capture_output=True, text=True, check=True).stdout
            files = [f for f in out.split("\0") if f and (self.basedir / f).exists()]
            # .git too: pod jobs' provenance then records the same commit and dirty flag as the desk
            return files + ([".git"] if (self.basedir / ".git").is_dir() else [])
        except (subprocess.CalledProcessError, FileNotFoundError):
            skip = {".venv", ".git", ".snakemake", "results", "smoke", "logs", "benchmarks", "__pycache__"}
            return [str(p.relative_to(self.basedir)) for p in self.basedir.rglob("*")
                    if p.is_file() and not (set(p.relative_to(self.basedir).parts) & skip)]

    def teardown(self, pod: Pod) -> None:
        for proc in list(pod.procs):
            proc.kill()
        try:
            td = runpod.terminate_verified(self.client, pod.id, pod.created - dt.timedelta(hours=1),
                                           timeout_s=self.cfg["teardown_timeout_s"], poll_s=min(2.0, self.cfg["poll_s"]))
        except runpod.RunPodError as err:
            self.log(f"runpod: terminating {pod.id} failed: {err}. Run `fourloops pods reap`.", warning=True)
            return
        self.pool.teardowns.append(td)
        cost = "unknown" if td.cost_usd is None else f"${td.cost_usd:.4f}"
        if td.verified:
            self.last_teardown_verified = time.monotonic()
            self.record.remove(pod.id)
            self.log(f"runpod: pod {pod.id} terminated; verified gone from the pod list and billing stopped "
                     f"({td.seconds:.1f} s); cost {cost}")
        else:
            self.log(f"runpod: pod {pod.id} teardown NOT verified within {self.cfg['teardown_timeout_s']:.0f} s "
                     f"(gone from list: {td.gone_from_list}, billing stopped: {td.billing_stopped}); "
                     f"run `fourloops pods reap`", warning=True)

    def pod_work_left(self) -> bool:
        """Whether the DAG still has unfinished jobs that would run on a pod."""
        try:
            return any(not job.is_local for job in list(self.workflow.dag.needrun_jobs()))
        except Exception:  # the scheduler changed the DAG under us: assume there is work
            return True

    def _heartbeat_loop(self) -> None:
        while not self._stop_heartbeat.wait(2.0):
            try:
                self.record.write()
                self.pool.idle_check()
            except Exception as err:  # never let the heartbeat die silently
                self.log(f"runpod: heartbeat: {err}", warning=True)

    # executor interface -----------------------------------------------------------------------
    def run_job(self, job: JobExecutorInterface):
        self._install_signal_handlers()
        future = self.jobs.submit(self._run_remote, job)
        self.report_job_submission(SubmittedJobInfo(job=job, external_jobid=None, aux={"future": future}))

    def _run_remote(self, job: JobExecutorInterface) -> tuple[bool, str]:
        try:
            pod = self.pool.acquire()
        except Exception as err:
            return False, redact(str(err))
        try:
            return self._run_on(pod, job)
        except Exception as err:
            pod.healthy = False
            return False, redact(f"runpod: {err}")
        finally:
            self.last_pod_job_end = time.monotonic()
            self.pool.release(pod)

    def _run_on(self, pod: Pod, job: JobExecutorInterface) -> tuple[bool, str]:
        cwd = Path.cwd()
        inputs = [self._rel(f, cwd) for f in job.input]
        inputs = [f for f in inputs if f and (cwd / f).exists()]
        up = self.rsync(pod, inputs, str(cwd) + "/", self.remote(pod, "work/"))
        if up.returncode != 0:
            self._check_alive(pod)
            return False, f"runpod: syncing inputs to {pod.id} failed: {redact(up.stderr[-1500:])}"
        with self._fmt_lock:  # format_job_exec reads the pod's paths from self
            self._remote_repo = f"{pod.root}/repo"
            python = self.cfg["python"].format(workspace=pod.workspace, root=pod.root, repo=self._remote_repo)
            exec_job = self._to_remote(self.format_job_exec(job)).replace(self.PY_TOKEN, python)  # a command prefix, as configured
        logname = f"{job.name}-{job.jobid}-{self.run_id}.log"
        rlog = f"{pod.root}/joblogs/{logname}"
        invocation = redact(os.environ.get("FOURLOOPS_INVOCATION", ""))  # the desk's command, for provenance
        command = (
            "[ -f /etc/rp_environment ] && . /etc/rp_environment; "
            f"export FOURLOOPS_INVOCATION={shlex.quote(invocation)}; "
            f"cd {shlex.quote(pod.root)}/work && export PYTHONPATH={shlex.quote(self._remote_repo + '/src')}"
            "${PYTHONPATH:+:$PYTHONPATH} && "
            f"{{ {exec_job} ; }} > {shlex.quote(rlog)} 2>&1"
        )
        t0 = time.monotonic()
        res = self.ssh(pod, command, track=True)
        seconds = time.monotonic() - t0
        products = [self._rel(f, cwd) for f in [*job.output, *job.log, *([job.benchmark] if job.benchmark else [])]]
        products = [f for f in products if f]
        down = self.rsync(pod, products, self.remote(pod, "work/"), str(cwd) + "/")
        if res.returncode == 0 and down.returncode == 0:
            return True, ""
        if res.returncode == 255 or self._cancel.is_set():
            # ssh itself failed: the connection died (or we cut it); a pod whose ssh is gone is torn down
            alive = self._check_alive(pod)
            why = "the run was cancelled" if self._cancel.is_set() else (
                "ssh to the pod died mid-job" + ("" if alive else "; the pod no longer answers and was terminated"))
            return False, f"runpod: {why} after {seconds:.0f} s (ssh: {redact(res.stderr.strip()[-500:])})"
        tail = self.ssh(pod, f"tail -n 40 {shlex.quote(rlog)}", timeout=30).stdout
        if res.returncode == 0:
            return False, f"runpod: copying the outputs back from {pod.id} failed: {redact(down.stderr[-1500:])}"
        return False, (f"runpod: job failed on pod {pod.id} (exit {res.returncode}) after {seconds:.0f} s; "
                       f"remote log {rlog}, last lines:\n{redact(tail)}")

    def _check_alive(self, pod: Pod) -> bool:
        if self._cancel.is_set():
            pod.healthy = False
            return False
        ok = self.ssh(pod, "true", timeout=20).returncode == 0
        if not ok:
            pod.healthy = False
        return ok

    @staticmethod
    def _rel(path, cwd: Path) -> str | None:
        p = Path(str(path))
        if p.is_absolute():
            try:
                return str(p.relative_to(cwd))
            except ValueError:
                return None  # outside the working directory: not moved (documented limitation)
        return str(p)

    async def check_active_jobs(self, active_jobs: List[SubmittedJobInfo]) -> AsyncGenerator[SubmittedJobInfo, None]:
        for info in active_jobs:
            future = info.aux["future"]
            if not future.done():
                yield info
                continue
            ok, msg = future.result()
            if ok:
                self.report_job_success(info)
            else:
                self.report_job_error(info, msg=msg + "\n")

    def cancel_jobs(self, active_jobs: List[SubmittedJobInfo]):
        self._cancel.set()
        for pod in list(self.pool.pods):
            for proc in list(pod.procs):
                proc.kill()

    def shutdown(self):
        super().shutdown()
        self._finish()

    def _finish(self) -> None:
        with self._done_lock:
            if self._done:
                return
            self._done = True
        self._stop_heartbeat.set()
        self.pool.close()
        self.jobs.shutdown(wait=False, cancel_futures=True)
        tds = self.pool.teardowns
        if tds:
            costs = [td.cost_usd for td in tds if td.cost_usd is not None]
            if self.last_pod_job_end is not None and self.last_teardown_verified is not None:
                self.log(f"runpod: teardown verified {self.last_teardown_verified - self.last_pod_job_end:.1f} s "
                         "after the last pod job ended")
            self.log(f"runpod: session cost ${sum(costs):.4f} over {len(tds)} pod(s)"
                     + ("" if all(td.verified for td in tds) else " (some teardowns NOT verified: run `fourloops pods reap`)"))
        else:
            self.log("runpod: no pod was created; session cost $0.0000")
        if all(td.verified for td in tds):
            self.record.close()
        shutil.rmtree(self.keydir, ignore_errors=True)

    def _install_signal_handlers(self) -> None:
        if self._signals_installed or threading.current_thread() is not threading.main_thread():
            return
        self._signals_installed = True
        previous = signal.getsignal(signal.SIGTERM)

        def on_term(signum, frame):
            # Cut the pod jobs now (they fail), then let Snakemake's own graceful exit run shutdown().
            self.log("runpod: SIGTERM: stopping pod jobs; the pods will be terminated")
            self.cancel_jobs([])
            if callable(previous):
                previous(signum, frame)

        signal.signal(signal.SIGTERM, on_term)


def _parse(text):
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
