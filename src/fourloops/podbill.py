"""What a pod run is billed: its life's delays (config/pod_life.yaml), the forecast of a run's bill, and where
a billed second went.

RunPod bills from the image pull to the terminate; a pod bills while it waits. So a bill is the pod's fixed
costs (pull, RUNNING with a null runtime and a stale ssh port, setup and the weights download), then per job
its inputs up, its GPU seconds, its outputs down, then the teardown. The floor (issue 23's) is
pull + max(setup, weights download) + GPU-busy + teardown; with the download started by the container's own
start command (before ssh answers) the pod's life gives a second one, `floor_container_s`.

Besides the pod's life, the executor's own calls take billed seconds: each ssh (connect, log in, exit), each rsync
and the REST poll that sees the pod ready (`calls`: POD_CALLS once per pod, JOB_CALLS per pod job, times
pod_life's seconds per call, measured on a loopback sshd, not over the internet), and half a poll interval
between the pod being ready and the executor seeing it.

A pod that runs a `container` job (the DFC's compile, container.host: pod) first gets the DFC's venv
(snakemake_executor_plugin_runpod.dfcvenv, `DfcVenv.ensure`), after that job's inputs and weights wait and
before its command, with nothing beside it, once per pod: DFC_VENV_CALLS (the marker's check, mkdir +
sha256sum, the build, the marker's write; one rsync per uploaded folder), the upload of `hef.dfc_wheel` (and
`hef.dfc_wheelhouse`'s wheels) at rsync_mb_s, and the build (pod_life's dfc_venv_build_s, a SETTING). Each of
its parts is one of the executor's own calls, so a run's attribution bills it as `calls`: the forecast does so
too and names it apart (`dfc_venv`). A later container job on the pod checks the marker: one ssh.
"""

from __future__ import annotations

LINEAGE = False  # what a run costs, never what it writes

from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIFE_PATH = REPO / "config" / "pod_life.yaml"
LIFE_SCHEMA = REPO / "config" / "pod_life.schema.yaml"

# The causes a billed second is given, in the order a sweep prefers when two overlap: a second in which a job
# runs is GPU-busy whatever else moves; an upload during setup is the upload's; a download while ssh does not
# answer yet is the ready window's (the pod would wait for ssh without it).
BUSY = "job"
# `calls`: the executor's own ssh, rsync and REST calls where no work of the pod's covers them.
CAUSES = ("pull", "ready", "setup", "download", "transfer", "calls", "waiting", "teardown")
_PRIORITY = (BUSY, "transfer", "setup", "ready", "download", "pull", "teardown", "calls")
FETCH_AT = ("container", "sync")  # when the weights download starts: the container's start, or after the sync
FIGURES = ("image_gb", "pull_mb_s", "runtime_null_s", "ssh_stale_s", "wheels_gb", "setup_s", "hf_mb_s",
           "rsync_mb_s", "file_mb", "teardown_s", "ssh_call_s", "rsync_call_s", "rest_call_s", "dfc_venv_build_s")
# The executor's calls on a billed pod that no delay of the pod's life hides (the REST polls and failed ssh probes
# before the pod answers are under its `ready`; the terminate is in teardown_s), by kind
# (src/snakemake_executor_plugin_runpod/executor.py):
#   once per pod: the poll that sees ssh.direct and the `ssh true` that gets in, the workspace probe, mkdir, the
#   repo's rsync, the setup's ssh (fetch_at sync: one more ssh, the fetch's start);
#   per pod job: its inputs' rsync, its ssh, its outputs' rsync, and the first job of each model one ssh more
#   (`flock` on the model's download).
POD_CALLS = {"rest": 1, "ssh": 4, "rsync": 1}
JOB_CALLS = {"ssh": 1, "rsync": 2}
WEIGHTS_CALLS = {"ssh": 1}
# The DFC's venv on a pod (src/snakemake_executor_plugin_runpod/dfcvenv.py), once per pod before its first
# `container` job: ssh the marker's check, mkdir + sha256sum, the build, the marker's write; one rsync for the
# wheel, one more for a wheelhouse (DfcUpload.rsyncs). A later container job on the pod: the marker's check.
DFC_VENV_CALLS = {"ssh": 4}
DFC_REUSE_CALLS = {"ssh": 1}
DEFAULT_POLL_S = 5.0  # the executor's runpod.poll_s default (settings.py)


class PodLifeError(ValueError):
    pass


@dataclass(frozen=True)
class PodLife:
    """A pod's measured (or set) delays; seconds are billed seconds, sizes GB (10^9 B) or MB (10^6 B)."""

    image_gb: float
    pull_mb_s: float
    runtime_null_s: float
    ssh_stale_s: float
    wheels_gb: float
    setup_s: float
    hf_mb_s: float
    rsync_mb_s: float
    file_mb: float
    teardown_s: float
    ssh_call_s: float
    rsync_call_s: float
    rest_call_s: float
    dfc_venv_build_s: float
    sources: dict = field(default_factory=dict, compare=False)

    @property
    def pull_s(self) -> float:
        return self.image_gb * 1000.0 / self.pull_mb_s

    @property
    def ready_s(self) -> float:
        """RUNNING with a null runtime, then a stale ssh port: billed, nothing can run."""
        return self.runtime_null_s + self.ssh_stale_s

    def download_s(self, gb: float) -> float:
        return gb * 1000.0 / self.hf_mb_s

    def transfer_s(self, mb: float) -> float:
        return mb / self.rsync_mb_s

    def calls_s(self, calls: dict[str, int]) -> float:
        """Seconds of the executor's calls `calls` ({kind: count}, kinds ssh, rsync, rest)."""
        per = {"ssh": self.ssh_call_s, "rsync": self.rsync_call_s, "rest": self.rest_call_s}
        return sum(per[k] * n for k, n in calls.items())


def load_life(path: str | Path | None = None) -> PodLife:
    """config/pod_life.yaml, checked against config/pod_life.schema.yaml (each figure {value, source}: a number,
    > 0 for a rate, >= 0 otherwise, with where it comes from); PodLifeError naming the file, line, key, value and
    what is allowed, as machines.yaml's and models.yaml's (a key given twice is refused, not silently the last)."""
    from fourloops import yamlcheck

    try:
        data = yamlcheck.load_checked(LIFE_PATH if path is None else path, LIFE_SCHEMA, what="pod life file")
    except yamlcheck.YamlError as err:
        raise PodLifeError(str(err)) from None
    return PodLife(**{key: float(data[key]["value"]) for key in FIGURES},
                   sources={key: data[key]["source"] for key in FIGURES})


def weights_gb(facts: dict, key: str) -> float:
    """GB a model's weights download: its components' parameters at bf16, the dtype the hub stores them in."""
    model = facts["models"].get(key) or {}
    per = float(facts["bytes_per_param"]["bf16"])
    return sum(float(c.get("params", 0.0)) for c in (model.get("components") or {}).values()) * per / 1e9


def tree_mb(basedir: Path, files: list[str]) -> float:
    """MB of `files` (relative to basedir; a directory counts every file under it): what a first rsync moves."""
    total = 0
    for f in files:
        p = Path(basedir) / f
        if p.is_dir():
            total += sum(q.stat().st_size for q in p.rglob("*") if q.is_file())
        elif p.is_file():
            total += p.stat().st_size
    return total / 1e6


def fetch_order(jobs: list[tuple[str, str, str, list[str]]]) -> list[str]:
    """The order a pod downloads the run's models in: first the model some job of which waits on no other pod
    job (fewest pod jobs upstream), then first use in `jobs` (output, profile, model, needs).

    Downloads are serial, so a model no job can use yet must not delay one that a job could use now (the
    scorer's grades need the generator's restyle: the generator downloads first)."""
    by_out = {o: (prof, needs) for o, prof, _, needs in jobs}
    depth: dict[str, int] = {}

    def upstream(out: str, seen=()) -> int:  # pod jobs on the longest chain above `out`
        if out not in depth:
            prof, needs = by_out[out]
            depth[out] = max((upstream(n, seen + (out,)) + (by_out[n][0] == "pod")
                              for n in needs if n in by_out and n not in seen), default=0)
        return depth[out]

    first: dict[str, tuple[int, int]] = {}
    for i, (out, prof, model, _) in enumerate(jobs):
        if prof == "pod" and model:
            key = (upstream(out), i)
            first[model] = min(first.get(model, key), key)
    return sorted(first, key=first.get)


# ------------------------------------------------------------------------------------------------ forecast
@dataclass(frozen=True)
class PodJob:
    """A pod job as the bill sees it: its GPU seconds, the model it loads, the MB it moves each way; `container`:
    a job of the `container` profile (the DFC's compile), which needs the DFC's venv on the pod."""

    name: str
    seconds: float
    model: str = ""
    in_mb: float = 0.0
    out_mb: float = 0.0
    container: bool = False


@dataclass(frozen=True)
class DfcUpload:
    """What the executor uploads for the DFC's venv: MB (None: a configured file is not there now, so unknown),
    its rsyncs (one per folder: the wheel's, the wheelhouse's) and what is missing."""

    mb: float | None
    rsyncs: int = 1
    missing: str = ""


def dfc_upload(hef: dict) -> DfcUpload:
    """The sizes of `hef.dfc_wheel` and of the `*.whl` in `hef.dfc_wheelhouse` (what DfcWheel.from_config hashes
    and a fresh pod gets whole), stat'ed now; a file or folder not there makes the upload unknown (whether the
    config is right is the preflight's and the executor's to say, not the bill's)."""
    from snakemake_executor_plugin_runpod.dfcvenv import configured_files

    hef = hef or {}
    wheel, house = hef.get("dfc_wheel"), hef.get("dfc_wheelhouse")
    path, files = configured_files(hef)
    total, missing = 0, []
    if path is not None and path.is_file():
        total += path.stat().st_size
    else:
        missing.append("hef.dfc_wheel " + (f"{str(wheel)!r} is not a file now" if wheel else "is not set"))
    if house:
        if files:
            total += sum(f.stat().st_size for f in files)
        else:
            missing.append(f"hef.dfc_wheelhouse {str(house)!r} holds no *.whl now")
    return DfcUpload(None if missing else total / 1e6, 1 + bool(house), "; ".join(missing))


def dfc_venv(life: PodLife, upload: DfcUpload) -> dict:
    """The DFC venv's set-up on one pod, billed seconds by part (the upload 0 when unknown, flagged so)."""
    calls = dict(DFC_VENV_CALLS, rsync=upload.rsyncs)
    parts = {"calls_s": life.calls_s(calls),
             "upload_s": 0.0 if upload.mb is None else life.transfer_s(upload.mb),
             "build_s": life.dfc_venv_build_s}
    return {"seconds": sum(parts.values()), **parts, "calls": calls, "upload_mb": upload.mb,
            "upload_known": upload.mb is not None, "missing": upload.missing}


def forecast(jobs: list[PodJob], life: PodLife, weights: dict[str, float], *, repo_mb: float, hourly_usd: float,
             overlap_download: bool = True, fetch_at: str = "container", poll_s: float = DEFAULT_POLL_S,
             dfc: DfcUpload | None = None) -> dict:
    """The bill of running `jobs` in order on one pod: seconds per cause, the floors and the cost.

    `weights`: GB per model key. With `overlap_download`, every model downloads one after another from
    `fetch_at`: "container" (the pod's start command, when its runtime appears: the stale-ssh window and the
    repo's sync before the setup) or "sync" (with the setup); a job waits only for its own model. Without it,
    each model downloads before its first job, after the setup. The executor's calls (POD_CALLS, JOB_CALLS,
    WEIGHTS_CALLS at pod_life's seconds per call) and half a poll interval (`poll_s`, the executor's) are `calls`,
    except where a download still running hides them. With a `container` job, the DFC's venv (`dfc`: its upload;
    None, unknown) is set up before the first one's command and billed as `calls`; the bill's `dfc_venv` says
    its parts."""
    if fetch_at not in FETCH_AT:
        raise ValueError(f"fetch_at = {fetch_at!r} is not allowed: expected one of {', '.join(FETCH_AT)}")
    causes = dict.fromkeys(CAUSES, 0.0)
    causes["pull"] = life.pull_s
    causes["ready"] = life.ready_s
    causes["transfer"] = life.transfer_s(repo_mb)
    # before the setup runs: the poll sees the pod ready half a poll cycle late on average, then the pod's calls
    pod_calls = dict(POD_CALLS, ssh=POD_CALLS["ssh"] + (fetch_at == "sync" and overlap_download))
    before_setup = (poll_s + life.rest_call_s + life.ssh_call_s) / 2.0 + life.calls_s(pod_calls)
    causes["calls"] = before_setup
    job_call_s = life.calls_s(JOB_CALLS)
    weights_call_s = life.calls_s(WEIGHTS_CALLS)
    containers = sum(j.container for j in jobs)
    venv = dfc_venv(life, dfc if dfc is not None else DfcUpload(None, 1, "no hef.dfc_wheel given")) if containers else None
    venv_s = {True: venv["seconds"] if venv else 0.0, False: life.calls_s(DFC_REUSE_CALLS)}  # first, later
    models = [j.model for j in jobs if j.model in weights]
    first_of = {m: i for i, m in reversed(list(enumerate(models)))}
    dl_total = sum(life.download_s(weights[m]) for m in first_of)
    t = 0.0  # seconds since the setup began
    if overlap_download:
        # downloads run one after another from t = 0, beside the setup; job i starts when its model is in
        # t = 0 is the setup's start; the container starts the ssh-stale window, the executor's calls and the
        # repo's sync before it
        ready_at = {}
        acc = -(life.ssh_stale_s + before_setup + life.transfer_s(repo_mb)) if fetch_at == "container" else 0.0
        for m in sorted(first_of, key=first_of.get):
            acc += life.download_s(weights[m])
            ready_at[m] = acc
        if fetch_at == "container" and ready_at:  # the calls before the setup run while the first download does
            first = ready_at[min(first_of, key=first_of.get)]
            pre = (-before_setup - life.transfer_s(repo_mb), -life.transfer_s(repo_mb))  # roughly: then the sync
            hidden = min(before_setup, max(0.0, first - pre[0]))
            causes["calls"] -= hidden
            causes["download"] += hidden
        t = life.setup_s
        causes["setup"] = life.setup_s
        waited, venv_first = set(), True
        for j in jobs:
            inputs_in = t + life.transfer_s(j.in_mb)
            calls = life.rsync_call_s + life.ssh_call_s  # the inputs' rsync, the job's ssh
            if j.model in ready_at and j.model not in waited:
                waited.add(j.model)
                calls += weights_call_s
            start = max(inputs_in + calls, ready_at.get(j.model, 0.0))
            hidden = min(start - inputs_in, max(0.0, ready_at.get(j.model, 0.0) - inputs_in))  # the download's
            causes["download"] += hidden
            causes["calls"] += start - inputs_in - hidden + life.rsync_call_s  # and the outputs' rsync
            causes["transfer"] += life.transfer_s(j.in_mb) + life.transfer_s(j.out_mb)
            if j.container:  # the DFC's venv, after the inputs and the weights' wait, before the command
                start += venv_s[venv_first]
                causes["calls"] += venv_s[venv_first]
                venv_first = False
            t = start + j.seconds + life.rsync_call_s + life.transfer_s(j.out_mb)
    else:
        causes["setup"] = life.setup_s
        causes["download"] = dl_total
        causes["transfer"] += sum(life.transfer_s(j.in_mb) + life.transfer_s(j.out_mb) for j in jobs)
        causes["calls"] += job_call_s * len(jobs)
        if containers:
            causes["calls"] += venv_s[True] + venv_s[False] * (containers - 1)
    causes["teardown"] = life.teardown_s
    gpu = sum(j.seconds for j in jobs)
    idle = {k: round(v, 1) for k, v in causes.items()}
    billed = round(gpu, 1) + sum(idle.values())  # the shown parts add up to the shown bill
    first_gb = weights[models[0]] if models else 0.0
    n_calls = {k: POD_CALLS.get(k, 0) + JOB_CALLS.get(k, 0) * len(jobs) for k in ("ssh", "rsync", "rest")}
    n_calls["ssh"] += (fetch_at == "sync" and overlap_download) + (len(first_of) if overlap_download else 0)
    if venv:
        for kind, n in venv["calls"].items():
            n_calls[kind] += n
        n_calls["ssh"] += DFC_REUSE_CALLS["ssh"] * (containers - 1)
    return {"billed_s": round(billed, 1), "gpu_s": round(gpu, 1), "idle_s": idle, "calls": n_calls,
            "floor_s": round(floor_s(life, first_gb, gpu), 1),
            "floor_container_s": round(floor_container_s(life, first_gb, gpu, repo_mb), 1), "fetch_at": fetch_at, "cost_usd": round(billed / 3600.0 * hourly_usd, 4), "hourly_usd": hourly_usd,
            "pods": 1, "weights_gb": {m: round(weights[m], 2) for m in first_of}, "repo_mb": round(repo_mb, 1),
            "dfc_venv": None if venv is None else {
                k: (round(v, 1) if isinstance(v, float) else v) for k, v in venv.items()}}


def floor_s(life: PodLife, first_download_gb: float, gpu_s: float) -> float:
    """What no scheduling avoids: the pull, the longer of setup and the first model's download, the GPU, the teardown."""
    return life.pull_s + max(life.setup_s, life.download_s(first_download_gb)) + gpu_s + life.teardown_s


def floor_container_s(life: PodLife, first_download_gb: float, gpu_s: float, repo_mb: float) -> float:
    """The floor when the download starts with the container: the pull and the null runtime (no container yet)
    are unavoidable, then the longer of the first model's download and (stale ssh, the repo's sync, the setup)."""
    return (life.pull_s + life.runtime_null_s + gpu_s + life.teardown_s
            + max(life.download_s(first_download_gb), life.ssh_stale_s + life.transfer_s(repo_mb) + life.setup_s))


# ------------------------------------------------------------------------------------------------ attribution
def attribute(intervals: list[tuple[str, float, float]], start: float, end: float) -> dict:
    """Where each second from `start` (the pod's creation: billing starts) to `end` (billing stops) went.

    `intervals`: (cause, t0, t1) with cause `job` or one of CAUSES. Where several overlap, the second goes to
    the first in `_PRIORITY`; a second no interval covers is `waiting` (the pod billed, nothing to do)."""
    for cause, _, _ in intervals:
        if cause != BUSY and cause not in CAUSES:
            raise ValueError(f"unknown cause {cause!r}; allowed: {BUSY}, {', '.join(CAUSES)}")
    cuts = sorted({start, end, *(min(max(t, start), end) for _, a, b in intervals for t in (a, b))})
    out = dict.fromkeys((BUSY, *CAUSES), 0.0)
    for a, b in zip(cuts, cuts[1:]):
        mid = (a + b) / 2.0
        active = {c for c, t0, t1 in intervals if t0 <= mid < t1}
        cause = next((c for c in _PRIORITY if c in active), "waiting")
        out[cause] += b - a
    billed = end - start
    return {"billed_s": billed, "gpu_s": out[BUSY], "idle_s": {c: out[c] for c in CAUSES}}


def calls_line(calls: list[tuple[str, float, float]], ready: float, end: float | None) -> str:
    """The executor's own calls to a pod (kind, t0, t1), counted and timed: those from `ready` (the probe that got
    in) to `end` (the terminate) are the ones the forecast counts (POD_CALLS, JOB_CALLS, WEIGHTS_CALLS); the polls
    and failed probes before are under the pod's `ready`."""
    import statistics

    def part(sel) -> str:
        out = []
        for kind in ("ssh", "rsync", "rest"):
            took = [t1 - t0 for k, t0, t1 in sel if k == kind]
            if took:
                out.append(f"{kind} {len(took)} (median {statistics.median(took):.3f} s, min {min(took):.3f} s, "
                           f"{sum(took):.2f} s in all)")
        return ", ".join(out) or "none"

    end = float("inf") if end is None else end
    billed = [c for c in calls if ready <= c[1] < end]
    before = [c for c in calls if c[1] < ready]
    return f"executor calls from ready to terminate: {part(billed)}; before ready: {part(before)}"


def dfc_venv_line(venv: dict) -> str:
    """The DFC venv's set-up as the bill names it: its seconds and their parts."""
    upload = (f"upload {venv['upload_s']:.1f} s ({venv['upload_mb']:.1f} MB at rsync_mb_s)" if venv["upload_known"]
              else f"upload unknown ({venv['missing']}; not counted)")
    calls = ", ".join(f"{n} {k}" for k, n in venv["calls"].items())
    return (f"DFC venv set-up (once per pod, before its first container job): {venv['seconds']:.0f} s = build "
            f"{venv['build_s']:.0f} s (pod_life dfc_venv_build_s, a SETTING) + {upload} + calls {venv['calls_s']:.1f} s "
            f"({calls})")


def summary_lines(measured: dict, forecast_: dict | None, billed_usd: float | None, unit: str = "s") -> list[str]:
    """The run's bill beside the forecast, and every idle second with its cause."""
    idle = measured["idle_s"]
    b, g = measured["billed_s"], measured["gpu_s"]
    lines = [f"pod bill: {b:.1f} {unit} billed, {g:.1f} {unit} GPU-busy ({b / g:.2f}x)" if g else
             f"pod bill: {b:.1f} {unit} billed, no GPU-busy second"]
    lines.append("  idle by cause: " + ", ".join(f"{c} {idle[c]:.1f}" for c in CAUSES)
                 + f" (sum {sum(idle.values()):.1f} {unit})")
    if forecast_ is not None:
        cost = "" if billed_usd is None else f"; billed ${billed_usd:.4f} against forecast ${forecast_['cost_usd']:.4f}"
        lines.append(f"  forecast (fourloops plan --machine pod): {forecast_['billed_s']:.1f} s billed, "
                     f"{forecast_['gpu_s']:.1f} s GPU-busy{cost}")
        lines.append("  forecast idle by cause: " + ", ".join(f"{c} {forecast_['idle_s'].get(c, 0.0):.1f}" for c in CAUSES))
        if forecast_.get("dfc_venv"):
            lines.append("  " + dfc_venv_line(forecast_["dfc_venv"]) + " (in calls)")
    return lines
