"""The Dataflow Compiler's own virtual environment on a pod, for jobs of the `container` profile.

No Docker runs on a pod, so the DFC's environment there is a venv the executor builds from the user's
licensed wheel (`hef.dfc_wheel`), which it uploads; fourloops never downloads the DFC. Per pod:

- `<root>/dfc/wheels/<the wheel>` (plus `<root>/dfc/wheelhouse/*.whl` when `hef.dfc_wheelhouse` is set): sent
  only when the file on the pod does not have the wheel's sha256 (checked there with sha256sum);
- `<root>/dfc/venv`: `<dfc_python> -m venv` WITHOUT --system-site-packages (the DFC pins its own
  dependencies; the image's packages stay out), then pip, isolated from any pip configuration on the pod,
  installs the uploaded file: with a wheelhouse `--no-index --find-links` it (nothing from the network),
  without one the wheel's dependencies come from PyPI through the pod's network;
- `<root>/dfc/venv/fourloops-dfc.json`, written last: the wheel's name and sha256, the wheelhouse digest and
  the DFC version read back from the venv (`importlib.metadata.version("hailo_dataflow_compiler")` after
  `import hailo_sdk_client`). A later container job on the pod whose wheel has the same digest reuses the
  venv: nothing uploaded, nothing installed.

The job itself runs under the pod's workflow environment (Snakemake 9 needs Python >= 3.11; the DFC's is 3.10);
FOURLOOPS_DFC_PYTHON tells it which interpreter runs the DFC part (fourloops.dfc). The build's log goes into
the job's log.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from snakemake_interface_common.exceptions import WorkflowError

from fourloops import dfc
from fourloops.provenance import redact

from .pool import Pod
from .settings import SettingsError

MARKER = "fourloops-dfc.json"
VERSION_TAG = "FOURLOOPS_DFC_VERSION="


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def configured_files(hef: dict) -> tuple[Path | None, list[Path]]:
    """The files the executor uploads for the DFC's venv, as `hef` names them now: `dfc_wheel`'s path (None: not set)
    and the `*.whl` of `dfc_wheelhouse`, sorted (none: not set, or none there). Whether they are right is
    fourloops.dfc's wheel_problem and wheelhouse_problem to say."""
    wheel, house = hef.get("dfc_wheel"), hef.get("dfc_wheelhouse")
    path = Path(os.path.expanduser(str(wheel))) if wheel else None
    return path, sorted(Path(os.path.expanduser(str(house))).glob("*.whl")) if house else []


@dataclass(frozen=True)
class DfcWheel:
    """The user's wheel (and optional wheelhouse), checked and hashed on the desk before any pod is rented."""

    path: Path
    sha256: str
    house: tuple[tuple[Path, str], ...]  # (wheel file, sha256) of hef.dfc_wheelhouse, sorted by name

    @classmethod
    def from_config(cls, hef: dict) -> "DfcWheel":
        wheel, house = hef.get("dfc_wheel"), hef.get("dfc_wheelhouse")
        problem = dfc.wheel_problem(wheel) or dfc.wheelhouse_problem(house)
        if problem:
            raise SettingsError(redact(f"runpod: a `container` job (the Dataflow Compiler) goes to a pod, but {problem}; "
                                       "nothing was rented"))
        path, files = configured_files(hef)
        path = path.resolve()
        return cls(path, sha256(path), tuple((f.resolve(), sha256(f)) for f in files))

    @property
    def digest(self) -> str:
        """One digest over the wheel and the wheelhouse: what a built venv is compared with."""
        h = hashlib.sha256(self.sha256.encode())
        for f, s in self.house:
            h.update(f"{f.name}:{s}".encode())
        return h.hexdigest()


@dataclass
class Built:
    python: str          # the venv's interpreter on the pod
    version: str         # hailo_dataflow_compiler's version in it
    log: str             # what the job's log gets (the build's output, or why nothing was built)
    uploaded: bool
    built: bool


class DfcVenv:
    def __init__(self, wheel: DfcWheel, python_template: str, transport, log):
        self.wheel = wheel
        self.python_template = python_template
        self.t = transport
        self.log = log
        self.locks: dict[str, threading.Lock] = {}
        self.build_logs: dict[str, str] = {}  # pod id -> the log of the build this run did there
        self.guard = threading.Lock()

    @staticmethod
    def root(pod: Pod) -> str:
        return f"{pod.root}/dfc"

    def python(self, pod: Pod) -> str:
        return f"{self.root(pod)}/venv/bin/python"

    def ensure(self, pod: Pod) -> Built:
        with self.guard:
            lock = self.locks.setdefault(pod.id, threading.Lock())
        with lock:  # one build per pod, whatever the pool does
            return self._ensure(pod)

    def _ensure(self, pod: Pod) -> Built:
        w, root, py = self.wheel, self.root(pod), self.python(pod)
        name = w.path.name
        seen = self.t.ssh(pod, f"test -x {shlex.quote(py)} && cat {shlex.quote(root)}/venv/{MARKER}", timeout=60)
        try:
            record = json.loads(seen.stdout) if seen.returncode == 0 else None
        except ValueError:
            record = None
        if record and record.get("digest") == w.digest:
            msg = (f"runpod: DFC venv {root}/venv on pod {pod.id} was built from {name} (sha256 {w.sha256[:16]}...; same "
                   f"digest): wheel not uploaded again, nothing installed; DFC {record['version']}")
            self.log(msg)
            earlier = self.build_logs.get(pod.id, "")
            return Built(py, record["version"], msg + "\n" + (f"(its build, earlier in this run:)\n{earlier}" if earlier else ""),
                         uploaded=False, built=False)

        t0 = time.monotonic()
        uploaded = self._upload(pod)
        house = bool(w.house)
        pip = ("env -u PYTHONPATH -u PYTHONHOME -u VIRTUAL_ENV PIP_CONFIG_FILE=/dev/null "
               f"{shlex.quote(py)} -m pip --isolated --no-input --disable-pip-version-check --no-cache-dir")
        source = (f"--no-index --find-links {shlex.quote(root + '/wheelhouse')}" if house else "")
        base = self.python_template.format(workspace=pod.workspace, root=pod.root, repo=pod.repo)
        probe = ("import importlib.metadata as m, sys, hailo_sdk_client; "
                 f"print('{VERSION_TAG}' + m.version('hailo_dataflow_compiler')); print('python', sys.version.split()[0])")
        steps = [
            f"rm -rf {shlex.quote(root)}/venv",
            f"{base} -m venv {shlex.quote(root)}/venv",
            f"{pip} install {source} {shlex.quote(root + '/wheels/' + name)}",
            f"{pip} show hailo_dataflow_compiler",
            f"{shlex.quote(py)} -c {shlex.quote(probe)}",
            f"{pip} freeze --all",
        ]
        script = "set -e; " + "; ".join(f"echo {shlex.quote('+ ' + step)}; {step}" for step in steps)
        self.log(f"runpod: building the DFC venv on pod {pod.id} from {name} ("
                 + ("dependencies from the uploaded wheelhouse, no index" if house else
                    "its dependencies from PyPI through the pod's network") + ")")
        res = self.t.ssh(pod, f"bash -c {shlex.quote(script)} 2>&1", timeout=3600, track=True)
        out = redact(res.stdout + res.stderr)
        header = (f"----- runpod: the DFC venv on pod {pod.id}, built from {name} (sha256 {w.sha256}) -----\n")
        if res.returncode != 0:
            tail = "\n".join(out.strip().splitlines()[-30:])
            raise DfcVenvError(header + out, f"runpod: building the DFC venv on pod {pod.id} from {name} failed (exit "
                               f"{res.returncode}; the venv is made with pod.runpod.dfc_python = {base!r}, which must be "
                               f"the DFC's Python on the pod); the job's log has the whole build, its last lines:\n{tail}")
        version = next((line[len(VERSION_TAG):].strip() for line in out.splitlines() if line.startswith(VERSION_TAG)), "")
        if not version:
            raise DfcVenvError(header + out, f"runpod: the DFC venv on pod {pod.id} did not report a "
                                             "hailo_dataflow_compiler version")
        record = {"wheel": name, "sha256": w.sha256, "digest": w.digest, "version": version,
                  "wheelhouse": [f.name for f, _ in w.house], "built_s": round(time.monotonic() - t0, 1)}
        mark = self.t.ssh(pod, f"printf %s {shlex.quote(json.dumps(record))} > {shlex.quote(root)}/venv/{MARKER}",
                          timeout=60)
        if mark.returncode != 0:
            raise DfcVenvError(header + out, f"runpod: cannot record the DFC venv on pod {pod.id}: {redact(mark.stderr)}")
        msg = f"runpod: DFC {version} in {root}/venv on pod {pod.id}, built in {record['built_s']:.0f} s"
        self.log(msg)
        self.build_logs[pod.id] = header + out + msg + "\n"
        return Built(py, version, self.build_logs[pod.id], uploaded=uploaded, built=True)

    def _upload(self, pod: Pod) -> bool:
        """The wheel (and wheelhouse) to the pod, each file only when the pod's copy has another sha256."""
        w, root = self.wheel, self.root(pod)
        groups = [(w.path.parent, "wheels", [(w.path, w.sha256)]), *([(None, "wheelhouse", list(w.house))] if w.house else [])]
        dirs = " ".join(shlex.quote(f"{root}/{sub}") for _, sub, _ in groups)
        listing = " ".join(shlex.quote(f"{root}/{sub}/{f.name}") for _, sub, files in groups for f, _ in files)
        sums = self.t.ssh(pod, f"mkdir -p {dirs} && (sha256sum {listing} 2>/dev/null || true)", timeout=600)
        if sums.returncode != 0:
            raise WorkflowError(f"runpod: cannot prepare {root} on pod {pod.id}: {redact(sums.stderr)}")
        there = {}
        for line in sums.stdout.splitlines():
            digest, _, path = line.partition("  ")
            there[path.strip()] = digest.strip()
        sent_wheel = False
        for _, sub, files in groups:
            send = [(f, s) for f, s in files if there.get(f"{root}/{sub}/{f.name}") != s]
            if sub == "wheels":
                sent_wheel = bool(send)
                if not send:
                    self.log(f"runpod: {w.path.name} is already on pod {pod.id} (sha256 {w.sha256[:16]}... matches): "
                             "not uploaded again")
            for parent in sorted({f.parent for f, _ in send}):
                names = [f.name for f, _ in send if f.parent == parent]
                size = sum((parent / n).stat().st_size for n in names)
                size_text = f"{size / 1e6:.1f} MB" if size >= 1e5 else f"{size / 1e3:.1f} kB"
                self.log(f"runpod: uploading {', '.join(names) if len(names) < 4 else f'{len(names)} wheels'} "
                         f"({size_text}) to pod {pod.id}:{root}/{sub}")
                up = self.t.rsync(pod, names, str(parent) + "/", self.t.remote(pod, f"dfc/{sub}/"))
                if up.returncode != 0:
                    raise WorkflowError(f"runpod: uploading the DFC wheel(s) to pod {pod.id} failed: {redact(up.stderr[-1500:])}")
        return sent_wheel


class DfcVenvError(WorkflowError):
    """The venv could not be built; `log` is what the job's log gets."""

    def __init__(self, log: str, msg: str):
        super().__init__(msg)
        self.log = log
