"""SLURM as an execution target, against a real one-node slurmctld/slurmd on this host (bin/setup installs
slurm-wlm and munge). Status through squeue (no slurmdbd): MinJobAge=300 >= 3x the first status delay.

The workflow runs from a copy of the repository whose config/machines.yaml `cluster:` describes this
node, as a user fills it in; the outputs are compared with the session's local smoke run."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO, SNAKEMAKE, snakemake_env

ETC = Path("/etc/slurm")
DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch", "/usr/bin/squeue")
FIRST_STATUS_S = 1  # the plugin waits this long before its first squeue, then 10 s more after each check that finds none ended
# The sub-DAG: render and the smoke detector on the cpu partition, keypoints asking a card (smoke.ask_card).
TARGETS = ["results/keypoints/render/az000.json"]
COMPARED = ["results/render/az000.png", "results/render/az000.json", "results/render/skeleton.json",
            "models/smoke/rfdetr-keypoint.pth", "results/keypoints/render/az000.json"]


def _run(*cmd, check=True, **kw):
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check, timeout=60, **kw)


class Slurm:
    """munged, slurmctld and slurmd in the foreground as our own children, stopped by pid."""

    def __init__(self, root: Path):
        missing = [d for d in DAEMONS if not Path(d).exists()]
        if missing:
            pytest.fail(f"SLURM is not installed ({', '.join(missing)} missing): run bin/setup (it installs slurm-wlm and munge)")
        self.root, self.procs = root, []
        self.host = socket.gethostname().split(".")[0]
        node = dict(kv.split("=", 1) for kv in _run("/usr/sbin/slurmd", "-C").stdout.split()[0:1] + [
            w for w in _run("/usr/sbin/slurmd", "-C").stdout.split() if "=" in w])
        self.cpus, self.mem_mb = int(node["CPUs"]), int(node["RealMemory"]) - 512  # headroom for the OS
        self.saved = root / "etc-slurm-saved"
        if ETC.exists():  # restored at stop (the jobstep plugin strips SLURM_CONF: the config must be here)
            shutil.copytree(ETC, self.saved, symlinks=True)
        ETC.mkdir(parents=True, exist_ok=True)
        for d in ("state", "spool"):
            (root / d).mkdir()
        (ETC / "slurm.conf").write_text(f"""ClusterName=fourloopstest
SlurmctldHost={self.host}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
ReturnToService=2
MpiDefault=none
MinJobAge=300
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
GresTypes=gpu
NodeName={self.host} CPUs={self.cpus} RealMemory={self.mem_mb} Gres=gpu:fake:1 State=UNKNOWN
PartitionName=cpu Nodes={self.host} Default=YES MaxTime=60 State=UP
PartitionName=gpu Nodes={self.host} MaxTime=60 State=UP
""")
        (ETC / "gres.conf").write_text(f"AutoDetect=off\nNodeName={self.host} Name=gpu Type=fake File=/dev/null\n")

    def start(self) -> None:
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        if not Path("/etc/munge/munge.key").exists():
            _run("/usr/sbin/mungekey", "--create")
            shutil.chown("/etc/munge/munge.key", "munge", "munge")
        self._spawn("munged", ["setpriv", "--reuid=munge", "--regid=munge", "--init-groups", "/usr/sbin/munged", "-F"])
        self._wait(lambda: _run("munge", "-n", check=False).returncode == 0, "munged answering")
        self._spawn("slurmctld", ["/usr/sbin/slurmctld", "-D", "-i"])
        self._spawn("slurmd", ["/usr/sbin/slurmd", "-D"])
        self._wait(lambda: _run("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.split()[:1] == ["idle"],
                   "the node idle in sinfo")

    def _spawn(self, name, cmd):
        log = open(self.root / f"{name}.out", "w")
        self.procs.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)))

    def _wait(self, ok, what, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for name, p in self.procs:
                if p.poll() is not None:
                    pytest.fail(f"{name} exited ({p.returncode}) waiting for {what}:\n" + self.logs())
            if ok():
                return
            time.sleep(0.5)
        pytest.fail(f"SLURM: no {what} after {timeout} s:\n" + self.logs())

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.root.glob("*.out")) + sorted(self.root.glob("*.log")))

    def job_ids(self) -> list[str]:
        """Every job the controller knows (finished ones too, for MinJobAge)."""
        return _run("squeue", "-h", "-t", "all", "-o", "%i").stdout.split()

    def stop(self) -> None:
        for name, p in reversed(self.procs):
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in ("slurm.conf", "gres.conf"):
            (ETC / f).unlink(missing_ok=True)
        if self.saved.exists():
            shutil.copytree(self.saved, ETC, symlinks=True, dirs_exist_ok=True)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    cluster = Slurm(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def repo_copy(slurm, tmp_path_factory):
    """The repository's files with config/machines.yaml `cluster:` describing this node."""
    dest = tmp_path_factory.mktemp("repo") / "fourloops"
    files = _run("git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard").stdout.splitlines()
    for f in files:
        if (REPO / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, dest / f)
    path = dest / "config" / "machines.yaml"
    table = yaml.safe_load(path.read_text())
    ram = round(slurm.mem_mb / 1024, 2)
    table["cluster"] = {
        "description": f"one-node test cluster on {slurm.host}", "submit_host": "desk", "os": "linux", "arch": "x86_64",
        "busy_card_limit_gib": 2.0,
        "slurm": {"gpu_request": "gpu", "default_partition": "cpu", "partitions": {
            "cpu": {"ram_gib": ram, "time_limit_min": 60},
            "gpu": {"gpu": {"name": "fake", "model": "fake", "vram_gib": 8.0, "count": 1}, "ram_gib": ram,
                    "time_limit_min": 60},
        }},
    }
    path.write_text(yaml.safe_dump(table, sort_keys=False))
    return dest


def run_on_slurm(repo: Path, workdir: Path, *args: str, **env_extra: str) -> subprocess.CompletedProcess:
    cmd = [SNAKEMAKE, "-s", str(repo / "Snakefile"), "--workflow-profile", str(repo / "profiles" / "slurm"),
           "--directory", str(workdir), "--slurm-status-command", "squeue", "--slurm-no-account",
           "--slurm-init-seconds-before-status-checks", str(FIRST_STATUS_S), "--slurm-logdir", str(workdir / "slurm-logs"),
           "--latency-wait", "5", *args]
    env = snakemake_env(PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
                        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]), **env_extra)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir, timeout=600)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_smoke_subdag_runs_through_slurm_with_a_gpu_job(slurm, repo_copy, smoke_run, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    before = set(slurm.job_ids())
    extra = tmp_path / "ask-card.yaml"
    extra.write_text("smoke: {ask_card: true}\n")
    proc = run_on_slurm(repo_copy, workdir, f"--configfile={extra}", "--config", "model_set=smoke", "--", *TARGETS)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:] + slurm.logs()
    jobs = _run("squeue", "-h", "-t", "all", "-O", "JobID:12,Partition:12,tres-per-job:40,State:12").stdout.splitlines()
    ours = {line.split()[0]: line.split()[1:] for line in jobs if line.split()[0] not in before}
    # render, the smoke detector (cpu) and keypoints (asks a card: the gpu partition, the fake card)
    assert sorted((part, gres, state) for part, gres, state in ours.values()) == [
        ("cpu", "N/A", "COMPLETED"), ("cpu", "N/A", "COMPLETED"), ("gpu", "gres:gpu:fake:1", "COMPLETED")], jobs
    local = smoke_run["workdir"]
    assert {f: sha(workdir / f) for f in COMPARED} == {f: sha(local / f) for f in COMPARED}


def test_job_no_partition_fits_is_refused_before_any_sbatch(slurm, repo_copy, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    before = slurm.job_ids()
    # the real generator's asks (tens of GiB of VRAM) against a cluster whose largest card has 8 GiB
    proc = run_on_slurm(repo_copy, workdir, "--", "results/generate/C/az000.png")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "fit no partition of cluster cluster (partitions cpu, gpu); nothing was submitted" in out, out[-4000:]
    table = out[out.index("rule generate, 1 job(s): results/generate/C/az000.png"):]
    assert "video memory" in table.splitlines()[2] and "8.00 GiB   refused" in table.splitlines()[2], table[:2000]
    assert slurm.job_ids() == before
    assert sorted(p.name for p in workdir.iterdir()) == [".snakemake"]


def test_failed_job_surfaces_its_log(slurm, repo_copy, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    # Anny's cache under a regular file (the job environment is exported): render fails on the node
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    bad = blocker / "anny"
    proc = run_on_slurm(repo_copy, workdir, "--config", "model_set=smoke", "--", "results/render/skeleton.json",
                        ANNY_CACHE_DIR=str(bad))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Error in rule render" in out, out[-6000:]
    assert str(bad) in out[out.index("Error in rule render"):], out[-6000:]
