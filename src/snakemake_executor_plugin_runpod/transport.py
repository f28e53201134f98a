"""ssh and rsync to a pod over direct TCP, with the run's own key and known_hosts file."""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

from .pool import Pod

SSH_OPTS = [
    "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new", "-o", "ConnectTimeout=10",
    "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR",
    "-o", "IdentitiesOnly=yes",
]


class Transport:
    def __init__(self, keyfile: Path, known_hosts: Path):
        self.keyfile = Path(keyfile)
        self.known_hosts = Path(known_hosts)

    def ssh_cmd(self, pod: Pod) -> list[str]:
        return ["ssh", "-i", str(self.keyfile), "-p", str(pod.port), "-o", f"UserKnownHostsFile={self.known_hosts}",
                *SSH_OPTS, f"{pod.user}@{pod.host}"]

    def ssh(self, pod: Pod, command: str, timeout: float | None = None, track: bool = False):
        """Run `command` on the pod; exit 124 when it ran past `timeout`. `track`: killed with the pod. The call is
        counted and timed on the pod (`Pod.called`)."""
        t0 = time.monotonic()
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
            pod.called("ssh", t0)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def rsync(self, pod: Pod, files: list[str], src: str, dest: str, timeout: float = 3600):
        """rsync -rt (recursive, keep mtimes: reruns move only what changed) a list of relative paths."""
        if not files:
            return subprocess.CompletedProcess([], 0, "", "")
        rsh = shlex.join(self.ssh_cmd(pod)[:-1])
        cmd = ["rsync", "-rtl", "--no-owner", "--no-group", "--from0", "--files-from=-", "-e", rsh, src, dest]
        t0 = time.monotonic()
        try:
            return subprocess.run(cmd, input="\0".join(files), capture_output=True, text=True, timeout=timeout)
        finally:
            pod.called("rsync", t0)

    @staticmethod
    def remote(pod: Pod, path: str = "") -> str:
        """rsync's name for `path` under the pod's fourloops root."""
        return f"{pod.user}@{pod.host}:{pod.root}/{path}"


def source_files(basedir: Path) -> list[str]:
    """The workflow's files to sync to a pod: git tracked + untracked-not-ignored, and .git itself (pod jobs'
    provenance then records the same commit and dirty flag as the desk)."""
    try:
        out = subprocess.run(["git", "-C", str(basedir), "ls-files", "-co", "--exclude-standard", "-z"],
                             capture_output=True, text=True, check=True).stdout
        files = [f for f in out.split("\0") if f and (basedir / f).exists()]
        return files + ([".git"] if (basedir / ".git").is_dir() else [])
    except (subprocess.CalledProcessError, FileNotFoundError):
        skip = {".venv", ".git", ".snakemake", "results", "smoke", "logs", "benchmarks", "__pycache__"}
        return [str(p.relative_to(basedir)) for p in basedir.rglob("*")
                if p.is_file() and not (set(p.relative_to(basedir).parts) & skip)]
