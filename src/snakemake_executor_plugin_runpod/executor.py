"""The executor: desk rules made local, pod jobs run over ssh on pods of the pool, verified teardown.

How a run goes:
- At start every rule none of whose pending jobs has a profile tag (its `profile` resource) that runs remotely
  under this executor (`fourloops.machines.remote_tags`) becomes a local rule, so desk jobs run on this machine.
- The first pod job creates a pod from machines.yaml's `pod:` section (GPU types in order, SECURE then
  COMMUNITY on "no instances"), with a per-run ed25519 key as PUBLIC_KEY and HF_TOKEN in the pod's own
  environment. Ready = status RUNNING, runtime not null, ssh.direct set, and `ssh ... true` succeeds
  over direct TCP. Then, once per pod: the workflow's files are rsynced and the setup command runs.
- The weights download (`fetch`) starts once per pod under a lock on the pod: from the pod's start command
  as the container starts (`fetch_at: container`, before ssh answers; it then execs the image's own start),
  or over ssh after the sync (`fetch_at: sync`). Each pod job's first step waits for that lock.
- Per job: rsync the inputs up, run Snakemake's own remote job command over ssh, rsync outputs, logs
  and benchmarks back (provenance records are outputs here).
- A job of the `container` profile (the Dataflow Compiler) goes to a pod when machines.yaml's container is
  hosted there: before any pod is rented the user's wheel (`hef.dfc_wheel`) is checked and hashed; on the
  pod the executor uploads it (skipped when the pod's copy has its sha256), builds the DFC's own venv from
  it once per pod (`dfcvenv`), and runs the job with FOURLOOPS_DFC_PYTHON naming that venv's interpreter.
- Pods are reused (pool_size), torn down after `idle_teardown_s` idle and when the run ends (normal
  exit, error, SIGTERM, SIGINT). Teardown is verified through the pod list and billing; the run prints
  the session's cost. `fourloops pods reap` handles the SIGKILL case.

There is no shared filesystem between desk and pod: the executor moves the files itself, while the
local Snakemake keeps its default (shared-fs) bookkeeping of the working directory.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import datetime as dt
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import AsyncGenerator, List

from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo
from snakemake_interface_executor_plugins.executors.real import RealExecutor
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface

from fourloops import dfc, machines, runpod
from fourloops.card import allocator_env
from fourloops.hub import FETCH_ENV
from fourloops.pods import RunRecord
from fourloops.provenance import redact

from . import settings as settings_mod
from .dfcvenv import DfcVenv, DfcVenvError, DfcWheel
from .pool import Pod, PodPool
from .transport import Transport, source_files

EXECUTOR_NAME = "runpod"
PY_TOKEN = "__FOURLOOPS_REMOTE_PYTHON__"  # replaced by the pod's python once the pod's paths are known
# The pod's fourloops root before the executor has asked the pod (as on_pod's `pod.root` once it has).
POD_ROOT_SH = '"${FOURLOOPS_WORKSPACE:-/workspace}/fourloops"'


def fetch_script(fetches: list[str], then: str = "") -> str:
    """Shell that takes one lock per download (fetch-N.lock under the pod's fourloops root), runs the downloads
    one after another in the background, each releasing its lock as it ends (its exit status to fetch-N.rc,
    the output to joblogs/fetch.log), then `then` holding none: a job waits with `flock -s` on its own model's."""
    fds = [10 + i for i in range(len(fetches))]
    take = "".join(f'exec {fd}>"$W/fetch-{i}.lock"; flock -x {fd}; ' for i, fd in enumerate(fds))
    run = "".join(f'( cd "$W" && {f} ); echo $? > "$W/fetch-{i}.rc"; exec {fd}>&-; '
                  for i, (f, fd) in enumerate(zip(fetches, fds)))
    close = " ".join(f"{fd}>&-" for fd in fds)
    return (f'W={POD_ROOT_SH}; mkdir -p "$W/joblogs"; rm -f "$W"/fetch-*.rc; {take}'
            f'{{ {run}}} > "$W/joblogs/fetch.log" 2>&1 < /dev/null & '
            + (f"exec {then} {close}" if then else f"exec {close}"))


def fetch_commands(template: str, weights: list[list[tuple[str, str]]]) -> list[str]:
    """The pod's downloads from the configured fetch command: with {models}, one command per model in the
    download order (its hub repos, each `ID --revision COMMIT`, one after another); without, one for every job."""
    paths = {"workspace": '"${FOURLOOPS_WORKSPACE:-/workspace}"', "root": '"$W"'}
    if "{models}" not in template:
        return [template.format(models="", **paths)]
    return [" && ".join(template.format(models=f"{shlex.quote(repo)} --revision {shlex.quote(commit)}", **paths)
                        for repo, commit in repos) for repos in weights]


def weights_said(weights: list[list[tuple[str, str]]]) -> str:
    """The downloads as a log line names them: `ID@COMMIT[:12]`, in order."""
    return ", ".join(f"{repo}@{commit[:12]}" for repos in weights for repo, commit in repos)


def on_pod(desk_command: str, basedir: Path, pod: Pod, python_template: str) -> str:
    """Snakemake's job command as formatted on the desk, with the desk's workflow directory and python
    replaced by the pod's."""
    python = python_template.format(workspace=pod.workspace, root=pod.root, repo=pod.repo)
    return desk_command.replace(str(basedir), pod.repo).replace(PY_TOKEN, python)


class Executor(RemoteExecutor):
    # A status check reads this process's own futures (no API call), so it runs every second from the first. A class
    # property, not a value set in __post_init__: RemoteExecutor starts its status thread before __post_init__, whose
    # first sleep read Snakemake's default of 10 s while __post_init__ was still running, and the run's first job
    # waited out those 10 s (every pod test paid them).
    STATUS_CHECK_S = 1

    @property
    def next_seconds_between_status_checks(self):
        return self.STATUS_CHECK_S

    def __post_init__(self):
        # The key first: without one, nothing is started or written.
        try:
            key = runpod.read_api_key()
        except runpod.RunPodError as err:
            raise settings_mod.SettingsError(f"runpod: {err}") from None
        given = self.workflow.executor_settings or settings_mod.ExecutorSettings()
        self.basedir = Path(self.workflow.basedir).resolve()
        config = settings_mod.load(given, self.basedir)
        self.settings: settings_mod.ExecutorSettings = config.settings
        self.pod_spec = config.pod
        self.run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        remote = machines.remote_tags(EXECUTOR_NAME, config.machines)
        self._make_desk_rules_local(remote)
        # The DFC's wheel, checked and hashed before any pod is rented, when a container job will go to one.
        self.dfc_wheel = None
        if "container" in remote and self._pending_profiles() & {"container"}:
            self.dfc_wheel = DfcWheel.from_config(self.workflow.config.get("hef") or {})
        if key.note:
            self.log(f"runpod: {key.note}", warning=True)
        self.client = runpod.Client(key.value, self.settings.api_url, timeout=30)
        self.record = RunRecord(self.run_id)
        self.record.write()
        self.keydir = self.record.keydir()
        keyfile = self.keydir / "id_ed25519"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"fourloops-{self.run_id}", "-f", str(keyfile)],
            check=True,
        )
        self.pubkey = (self.keydir / "id_ed25519.pub").read_text().strip()
        self.transport = Transport(keyfile, self.keydir / "known_hosts")
        self.dfc_venv = DfcVenv(self.dfc_wheel, self.settings.dfc_python, self.transport, self.log) if self.dfc_wheel else None
        if self.dfc_wheel:
            self.log(f"runpod: container jobs run the Dataflow Compiler from {self.dfc_wheel.path.name} (DFC "
                     f"{dfc.wheel_version(self.dfc_wheel.path)}, sha256 {self.dfc_wheel.sha256[:16]}...) in a venv on the pod")
        self.pool = PodPool(
            self.settings.pool_size, start=self.start_pod, stop=self.teardown, work_left=self.pod_work_left,
            idle_teardown_s=self.settings.idle_teardown_s, close_wait_s=self.settings.teardown_timeout_s + 30,
            log=self.log,
        )
        self.teardowns: list[runpod.Teardown] = []
        self.pods_seen: list[Pod] = []  # every pod of the run, for the bill's summary
        self.job_rank: dict[str, int] = {}  # pod job output -> its model's place in the download order
        self.forecast, self.fetch_models = self._forecast()
        self.jobs = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, self.settings.pool_size) * 2)
        self.last_pod_job_end: float | None = None
        self.last_teardown_verified: float | None = None
        self._done = False
        self._done_lock = threading.Lock()
        self._cancel = threading.Event()
        self._signals_installed = False
        self._stop_heartbeat = threading.Event()
        self._heartbeat = threading.Thread(target=self._heartbeat_loop, daemon=True)
        self._heartbeat.start()
        atexit.register(self._finish)
        self.log(f"runpod: run {self.run_id}: pod jobs go to RunPod ({self.client.base_url}), up to "
                 f"{self.settings.pool_size} pod(s) named {self.settings.name_prefix}-{self.run_id}-N")

    @staticmethod
    def _profile(job) -> str | None:
        """Where a job runs: its `profile` resource (every rule declares `resources: **ASKS`, whose profile tag
        its stage declaration gives, fourloops.smk); None for a target rule (all, probe)."""
        return machines.resource_value(job.resources, "profile")

    def _make_desk_rules_local(self, remote: set[str]) -> None:
        """Rules none of whose pending jobs runs remotely become local rules: Snakemake runs them here (the DAG is
        built before the executor; a rule's profile may depend on the config, lora.profile)."""
        away = {job.rule.name for job in self.workflow.dag.needrun_jobs() if self._profile(job) in remote}
        local = [rule.name for rule in self.workflow.rules if rule.name not in away]
        self.workflow.localrules(*local)
        self.local_rule_names = set(local)

    def _forecast(self) -> tuple[dict | None, list[list[tuple[str, str]]]]:
        """`fourloops plan --machine pod`'s bill forecast for this run's pod jobs, and the hub snapshots they load
        (per model, in the download order)."""
        from fourloops import plan
        from fourloops.smk import workflow_of

        try:
            view = workflow_of(self.workflow)
            saved = view.placement.target
            try:
                planned = plan.build(self.workflow, "pod",
                                     runpod={"fetch_at": self.settings.fetch_at, "poll_s": self.settings.poll_s})
            finally:  # the desk's jobs keep their own machine's asks
                view.placement.set_target(saved)
        except Exception as err:  # a forecast is a report: the run goes on without it
            self.log(f"runpod: no bill forecast ({type(err).__name__}: {err})", warning=True)
            return None, []
        from fourloops.podbill import fetch_order

        weights = self._hub_weights(planned["jobs"])  # a local directory is not downloaded
        order = [k for k in fetch_order([(j["output"], j["profile"], j["model"], j["needs"]) for j in planned["jobs"]])
                 if weights.get(k)]
        # a pod job's rank for the pool and its fetch lock: its model's place in the download order
        self.job_rank = {j["output"]: order.index(j["model"]) for j in planned["jobs"]
                         if j["profile"] == "pod" and j["model"] in order}
        bill = planned.get("pod_bill")
        if bill:
            self.log(f"runpod: forecast bill {bill['billed_s']:.0f} s (${bill['cost_usd']:.4f}), of it "
                     f"{bill['gpu_s']:.0f} s GPU-busy; floor {bill['floor_s']:.0f} s")
        fetch = [weights[k] for k in order]
        if fetch:
            self.log(f"runpod: the pod jobs load {weights_said(fetch)}, downloaded in that order")
        return bill, fetch

    def _hub_weights(self, planned: list[dict]) -> dict[str, list[tuple[str, str]]]:
        """models.yaml key -> the hub snapshots (id, commit) its pending pod jobs load: their stages' `hf_model`
        needs, so the configured ids at their pinned commits (the preflight refuses a revision that is no commit
        before any pod), the scorer's adapter with its base."""
        from fourloops.stage import stage_for

        key_of = {j["output"]: j["model"] for j in planned if j["profile"] == "pod" and j["model"]}
        out: dict[str, list[tuple[str, str]]] = {}
        for job in self.workflow.dag.needrun_jobs():
            key = key_of.get(str(job.output[0]) if len(job.output) else "")
            if key is None:
                continue
            for need in stage_for(job.rule.name).needs_for(dict(job.params.items())):
                if need.kind == "hf_model" and (need.what, need.revision) not in out.setdefault(key, []):
                    out[key].append((need.what, need.revision))
        return out

    def _pending_profiles(self) -> set[str]:
        """The profile tags of the jobs this run still has to do."""
        return {self._profile(job) for job in self.workflow.dag.needrun_jobs()} - {None}

    def log(self, msg: str, warning: bool = False) -> None:
        msg = redact(msg)
        (self.logger.warning if warning else self.logger.info)(msg)

    # the job command (formatted with desk paths; `on_pod` maps them) -------------------------------
    def get_python_executable(self):
        return PY_TOKEN

    def get_snakefile(self):
        return str(Path(self.workflow.main_snakefile).resolve())

    def get_job_args(self, job: JobExecutorInterface):
        # No --wait-for-files: those are local paths, and the inputs are already on the pod.
        return RealExecutor.get_job_args(self, job)

    # pod lifecycle ----------------------------------------------------------------------------
    def start_pod(self, n: int) -> Pod:
        name = f"{self.settings.name_prefix}-{self.run_id}-{n}"
        # A pod fetches the configured weights once into its HF cache on the container disk (the desk never
        # downloads at run time: fourloops.hub.resolve_model); FOURLOOPS_MACHINE says whose walls apply.
        env = {"PUBLIC_KEY": self.pubkey, FETCH_ENV: "1", "FOURLOOPS_MACHINE": "pod", **allocator_env("pod")}
        for var in self.pod_spec.pod_env:
            if os.environ.get(var):
                env[var] = os.environ[var]
        spec = self.pod_spec
        body = {"name": name, "image": spec.image, "disk": spec.disk_gb, "ports": list(spec.ports), "env": env}
        fetch = self._fetch_commands() if self.settings.fetch_at == "container" else []
        if fetch:  # the container's start command: the download from the container's first second, then the image's own start
            body["args"] = shlex.join(["bash", "-c", fetch_script(fetch, self.settings.image_start)])
        self.log(f"runpod: creating pod {name} ({spec.disk_gb} GB container disk, no volume, {spec.image})")
        t_create = time.monotonic()
        created = runpod.create_with_fallback(self.client, body, list(spec.gpus), list(spec.cloud_types), log=self.log)
        pod = Pod(created["id"], name, runpod.parse_time(created.get("createdAt")) or dt.datetime.now(dt.timezone.utc),
                  t_create=t_create, fetching=bool(fetch))
        if fetch:
            models = weights_said(self.fetch_models) or "as the fetch command says"
            self.log(f"runpod: pod {pod.id} downloads the weights ({models}) from its start command, then runs "
                     f"{self.settings.image_start}")
        self.pods_seen.append(pod)
        self.record.add(pod.id, name)
        self.log(f"runpod: pod {pod.id} created ({created.get('gpu', {}).get('id')}, {created.get('cloud')}); "
                 "waiting for it to be ready")
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
        limit = self.settings.ready_timeout_s
        pulled = None  # when the pod first showed past PROVISIONING (the image pull's end, as seen by polling)
        while True:
            if self._cancel.is_set():
                raise WorkflowError("runpod: cancelled while waiting for the pod")
            t_poll = time.monotonic()
            info = self.client.get_pod(pod.id)
            pod.called("rest", t_poll)
            seen = runpod.describe(info)
            if pulled is None and info and info.get("status") != "PROVISIONING":
                pulled = time.monotonic()
                pod.spent("pull", pod.t_create, pulled)
            endpoint = runpod.direct_ssh(info) if info else None
            if endpoint:
                pod.host, pod.port, pod.user = endpoint
                t_probe = time.monotonic()
                probe = self.transport.ssh(pod, "true", timeout=30)
                if probe.returncode == 0:
                    break
                ssh_err = redact(probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else f"exit {probe.returncode}")
            if time.monotonic() - t0 > limit:
                raise WorkflowError(
                    f"runpod: pod {pod.id} not ready within {limit:.0f} s; terminated. "
                    f"Last seen: {seen}" + (f"; last ssh attempt: {ssh_err}" if ssh_err else "")
                )
            time.sleep(self.settings.poll_s)
        probe = self.transport.ssh(pod, 'printf %s "${FOURLOOPS_WORKSPACE:-/workspace}"', timeout=30)
        pod.workspace = probe.stdout.strip() or "/workspace"
        if pulled is None:
            pulled = pod.t_create
        # RUNNING with a null runtime, then a stale ssh port: up to the poll that saw ssh.direct before the probe
        # that got in (that poll, that probe and the workspace probe are the executor's calls)
        pod.spent("ready", pulled, t_poll)
        self.log(f"runpod: pod {pod.id} ready after {time.monotonic() - t0:.0f} s (ssh {pod.host}:{pod.port}, direct TCP)")

    def _setup(self, pod: Pod) -> None:
        """Once per pod: the workflow's files, then the pod environment."""
        t0 = time.monotonic()
        files = source_files(self.basedir)
        dirs = " ".join(shlex.quote(d) for d in (pod.repo, pod.work, pod.joblogs))
        mk = self.transport.ssh(pod, f"mkdir -p {dirs}", timeout=60)
        if mk.returncode != 0:
            raise WorkflowError(f"runpod: cannot prepare {pod.root} on {pod.id}: {redact(mk.stderr)}")
        t_up = time.monotonic()
        up = self.transport.rsync(pod, files, str(self.basedir) + "/", self.transport.remote(pod, "repo/"))
        if up.returncode != 0:
            raise WorkflowError(f"runpod: syncing the workflow to {pod.id} failed: {redact(up.stderr[-2000:])}")
        pod.spent("transfer", t_up)
        if self.settings.fetch_at == "sync":
            self._start_fetch(pod)
        setup = self.settings.setup_command.format(workspace=pod.workspace, root=pod.root, repo=pod.repo)
        t_setup = time.monotonic()
        done = self.transport.ssh(pod, f"cd {shlex.quote(pod.repo)} && ( {setup} ) > ../joblogs/setup.log 2>&1",
                                  timeout=3600)
        pod.spent("setup", t_setup)
        if done.returncode != 0:
            tail = self.transport.ssh(pod, f"tail -n 30 {shlex.quote(pod.joblogs)}/setup.log", timeout=30).stdout
            raise WorkflowError(f"runpod: pod setup failed on {pod.id} (exit {done.returncode}):\n{redact(tail)}")
        self.log(f"runpod: pod {pod.id} set up in {time.monotonic() - t0:.0f} s ({len(files)} workflow files)")

    def _fetch_commands(self) -> list[str]:
        """The configured weights download for the pod's shell: with {models}, one per model in the download
        order (each its own lock: a job waits only for its model); without, one for every job. [] for none."""
        fetch = self.settings.fetch_command
        if not fetch.strip() or ("{models}" in fetch and not self.fetch_models):
            return []
        return fetch_commands(fetch, self.fetch_models)

    def _fetch_lock(self, job: JobExecutorInterface) -> int | None:
        """Which fetch lock a pod job waits on: its model's (by the download order), the only one, or none."""
        if "{models}" not in self.settings.fetch_command:
            return 0
        return self.job_rank.get(str(job.output[0]) if len(job.output) else "")

    def _start_fetch(self, pod: Pod) -> None:
        """fetch_at sync: the weights download over ssh, beside the setup; back once it holds the fetch locks."""
        fetch = self._fetch_commands()
        if not fetch:
            return
        res = self.transport.ssh(pod, fetch_script(fetch), timeout=60)
        if res.returncode != 0:
            self.log(f"runpod: the weights download could not start on {pod.id} (exit {res.returncode}: "
                     f"{redact(res.stderr.strip()[-300:])}); each job downloads what it lacks", warning=True)
            return
        pod.fetching = True
        self.log(f"runpod: downloading the weights ({weights_said(self.fetch_models) or 'as the fetch command says'}) on "
                 f"{pod.id} beside the setup")

    def _await_weights(self, pod: Pod, job: JobExecutorInterface) -> None:
        """Before a job: wait for its model's download (its fetch lock) unless one did already; billed `download`."""
        n = self._fetch_lock(job)
        if not pod.fetching or n is None or n in pod.weights_in:
            return
        t0 = time.monotonic()
        lock, rc = shlex.quote(f"{pod.root}/fetch-{n}.lock"), shlex.quote(f"{pod.root}/fetch-{n}.rc")
        res = self.transport.ssh(pod, f"flock -s {lock} cat {rc}", timeout=6 * 3600, track=True)
        pod.spent("download", t0)
        pod.weights_in.add(n)
        if (res.returncode != 0 or res.stdout.strip() != "0") and pod.healthy and not self._cancel.is_set():
            self.log(f"runpod: the weights download on {pod.id} did not finish cleanly (exit "
                     f"{res.stdout.strip() or res.returncode}; {pod.joblogs}/fetch.log); each job downloads what it "
                     "still lacks", warning=True)

    def teardown(self, pod: Pod) -> None:
        if pod.t_end is None:
            last = max((t1 for c, _, t1 in pod.timeline if c == "job"), default=None)
            pod.t_end = time.monotonic()
            if last is not None:
                pod.spent("teardown", last, pod.t_end)
        for proc in list(pod.procs):
            proc.kill()
        limit = self.settings.teardown_timeout_s
        try:
            td = runpod.terminate_verified(self.client, pod.id, pod.created - dt.timedelta(hours=1),
                                           timeout_s=limit, poll_s=min(2.0, self.settings.poll_s))
        except runpod.RunPodError as err:
            self.log(f"runpod: terminating {pod.id} failed: {err}. Run `fourloops pods reap`.", warning=True)
            return
        self.teardowns.append(td)
        cost = "unknown" if td.cost_usd is None else f"${td.cost_usd:.4f}"
        if td.verified:
            self.last_teardown_verified = time.monotonic()
            self.record.remove(pod.id)
            self.log(f"runpod: pod {pod.id} terminated; verified gone from the pod list and billing stopped "
                     f"({td.seconds:.1f} s); cost {cost}")
        else:
            self.log(f"runpod: pod {pod.id} teardown NOT verified within {limit:.0f} s "
                     f"(gone from list: {td.gone_from_list}, billing stopped: {td.billing_stopped}); "
                     f"run `fourloops pods reap`", warning=True)

    def pod_work_left(self) -> bool:
        """Whether the DAG still has unfinished jobs that would run on a pod."""
        try:
            return any(not job.is_local for job in list(self.workflow.dag.needrun_jobs()))
        except RuntimeError:  # the scheduler changed the DAG while we iterated: assume there is work
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
        desk_command = self.format_job_exec(job)  # in the scheduler's thread; the pod's paths come later
        future = self.jobs.submit(self._run_remote, job, desk_command)
        self.report_job_submission(SubmittedJobInfo(job=job, external_jobid=None, aux={"future": future}))

    def _run_remote(self, job: JobExecutorInterface, desk_command: str) -> tuple[bool, str]:
        try:
            pod = self.pool.acquire(self.job_rank.get(str(job.output[0]) if len(job.output) else "", 0))
        except Exception as err:
            return False, redact(str(err))
        try:
            return self._run_on(pod, job, on_pod(desk_command, self.basedir, pod, self.settings.remote_python))
        except Exception as err:
            pod.healthy = False
            return False, redact(f"runpod: {err}")
        finally:
            self.last_pod_job_end = time.monotonic()
            self.pool.release(pod)

    def _run_on(self, pod: Pod, job: JobExecutorInterface, exec_job: str) -> tuple[bool, str]:
        cwd = Path.cwd()
        t = self.transport
        inputs = [f for f in (_rel(f, cwd) for f in job.input) if f and (cwd / f).exists()]
        t_up = time.monotonic()
        up = t.rsync(pod, inputs, str(cwd) + "/", t.remote(pod, "work/"))
        pod.spent("transfer", t_up)
        if up.returncode != 0:
            self._check_alive(pod)
            return False, f"runpod: syncing inputs to {pod.id} failed: {redact(up.stderr[-1500:])}"
        self._await_weights(pod, job)
        rlog = f"{pod.joblogs}/{job.name}-{job.jobid}-{self.run_id}.log"
        invocation = redact(os.environ.get("FOURLOOPS_INVOCATION", ""))  # the desk's command, for provenance
        dfc_env, venv_log = "", None
        if self.dfc_venv is not None and self._profile(job) == "container":
            try:
                built = self.dfc_venv.ensure(pod)
            except DfcVenvError as err:
                self._log_into_job(job, cwd, err.log)
                return False, str(err)
            venv_log = built.log
            dfc_env = f"export {dfc.DFC_PYTHON_ENV}={shlex.quote(built.python)}; "
        command = (
            "[ -f /etc/rp_environment ] && . /etc/rp_environment; "
            f"export FOURLOOPS_INVOCATION={shlex.quote(invocation)}; {dfc_env}"
            f"cd {shlex.quote(pod.work)} && export PYTHONPATH={shlex.quote(pod.repo + '/src')}"
            "${PYTHONPATH:+:$PYTHONPATH} && "
            f"{{ {exec_job} ; }} > {shlex.quote(rlog)} 2>&1"
        )
        t0 = time.monotonic()
        res = t.ssh(pod, command, track=True)
        pod.spent("job", t0)
        seconds = time.monotonic() - t0
        products = [_rel(f, cwd) for f in [*job.output, *job.log, *([job.benchmark] if job.benchmark else [])]]
        t_down = time.monotonic()
        down = t.rsync(pod, [f for f in products if f], t.remote(pod, "work/"), str(cwd) + "/")
        pod.spent("transfer", t_down)
        if venv_log:
            self._log_into_job(job, cwd, venv_log)
        if res.returncode == 0 and down.returncode == 0:
            return True, ""
        if res.returncode == 255 or self._cancel.is_set():
            # ssh itself failed: the connection died (or we cut it); a pod whose ssh is gone is torn down
            alive = self._check_alive(pod)
            why = "the run was cancelled" if self._cancel.is_set() else (
                "ssh to the pod died mid-job" + ("" if alive else "; the pod no longer answers and was terminated"))
            return False, f"runpod: {why} after {seconds:.0f} s (ssh: {redact(res.stderr.strip()[-500:])})"
        tail = t.ssh(pod, f"tail -n 40 {shlex.quote(rlog)}", timeout=30).stdout
        if res.returncode == 0:
            return False, f"runpod: copying the outputs back from {pod.id} failed: {redact(down.stderr[-1500:])}"
        return False, (f"runpod: job failed on pod {pod.id} (exit {res.returncode}) after {seconds:.0f} s; "
                       f"remote log {rlog}, last lines:\n{redact(tail)}")

    @staticmethod
    def _log_into_job(job: JobExecutorInterface, cwd: Path, text: str) -> None:
        """`text` (what the executor did on the pod for this job) at the top of the job's log, here."""
        logs = [p for p in (_rel(f, cwd) for f in job.log) if p]
        if not logs:
            return
        path = cwd / logs[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        rest = path.read_text(errors="replace") if path.exists() else ""
        path.write_text(redact(text) + rest)

    def _check_alive(self, pod: Pod) -> bool:
        if self._cancel.is_set():
            pod.healthy = False
            return False
        ok = self.transport.ssh(pod, "true", timeout=20).returncode == 0
        if not ok:
            pod.healthy = False
        return ok

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
        tds = self.teardowns
        if tds:
            costs = [td.cost_usd for td in tds if td.cost_usd is not None]
            if self.last_pod_job_end is not None and self.last_teardown_verified is not None:
                self.log(f"runpod: teardown verified {self.last_teardown_verified - self.last_pod_job_end:.1f} s "
                         "after the last pod job ended")
            self.log(f"runpod: session cost ${sum(costs):.4f} over {len(tds)} pod(s)"
                     + ("" if all(td.verified for td in tds) else " (some teardowns NOT verified: run `fourloops pods reap`)"))
            self._bill_summary(sum(costs) if costs else None)
        else:
            self.log("runpod: no pod was created; session cost $0.0000")
        if all(td.verified for td in tds):
            self.record.close()
        shutil.rmtree(self.keydir, ignore_errors=True)

    def _bill_summary(self, billed_usd: float | None) -> None:
        """Where every billed second of the run's pods went (this side's clock), beside the plan's forecast."""
        from fourloops import podbill

        total = None
        for pod in self.pods_seen:
            if pod.t_end is None:
                continue
            got = podbill.attribute(pod.timeline, pod.t_create, pod.t_end)
            if total is None:
                total = got
            else:
                total = {"billed_s": total["billed_s"] + got["billed_s"], "gpu_s": total["gpu_s"] + got["gpu_s"],
                         "idle_s": {c: total["idle_s"][c] + got["idle_s"][c] for c in podbill.CAUSES}}
        if total is not None:
            for line in podbill.summary_lines(total, self.forecast, billed_usd):
                self.log(f"runpod: {line}")
        for pod in self.pods_seen:
            ready = max((t1 for c, _, t1 in pod.timeline if c == "ready"), default=pod.t_create)
            self.log(f"runpod: pod {pod.id}: {podbill.calls_line(pod.calls, ready, pod.t_end)}")

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


def _rel(path, cwd: Path) -> str | None:
    """`path` relative to the working directory; None outside it (not moved: a documented limitation)."""
    p = Path(str(path))
    if p.is_absolute():
        try:
            return str(p.relative_to(cwd))
        except ValueError:
            return None
    return str(p)
