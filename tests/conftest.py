"""Shared fixtures. The smoke ladder runs once per test run, shared by pytest-xdist's workers (pyproject.toml: two,
each taking whole files); tests that need a built workflow copy its working directory instead of building again
(2-core machines: one torch thread each)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

# Fake secrets: the smoke run carries them in its environment; no artifact may contain them.
FAKE_SECRETS = {
    "HF_TOKEN": "fake-hf-token-Zq8Wv3Kp1Lm9",
    "RUNPOD_API_KEY": "fake-runpod-key-Yt5Rb2Nx7Hc4",
}



def driver_sees(peak: float, weights: float, kind: str = "inference", size: int | None = None,
                references: int | None = None) -> float:
    """What the walls ask for a torch peak of which `weights` GiB are resident weights, as the README and
    config/models.yaml state it: the pool's reserve of the peak and of the pass over the weights, then the CUDA
    context, per kind of process (`process_overhead`; a kind's `context_step` from its resolution on, at `size` px;
    a generator kind's `activations_reserve_by_references` for a pass with `references` reference images, and its
    `activations_floor_gib` where the pool keeps more than that share)."""
    import yaml

    over = yaml.safe_load((REPO / "config" / "models.yaml").read_text())["process_overhead"][kind]
    step = over.get("context_step")
    ctx = step["cuda_context_gib"] if step and size is not None and size >= step["from_px"] else over["cuda_context_gib"]
    per_act = (over.get("activations_reserve_by_references") or {}).get(references, over["activations_reserve"])
    kept = max(max(0.0, peak - weights) * per_act, over.get("activations_floor_gib", 0.0))  # the pool's floor
    return peak * (1 + over["allocator_reserve"]) + kept + ctx


os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
# Anny builds its ~790 MB cache once (about 35 s); keep it across sessions on this machine.
os.environ.setdefault("ANNY_CACHE_DIR", str(Path.home() / ".cache" / "fourloops" / "anny"))


COMMIT = "0f72fa92564d9f8ba76f53fcc3c05aca2372458f"  # a hub commit's form (40 hex digits); no such snapshot here


def pinned(directory: Path) -> str:
    """A config file that pins the generator's hub commit, which a real run needs (the shipped config pins none)."""
    path = directory / "pinned.yaml"
    path.write_text(f"generator:\n  revision: {COMMIT}\n")
    return str(path)


def snakemake_env(**extra: str) -> dict:
    env = dict(os.environ)
    env.pop("FOURLOOPS_INVOCATION", None)
    env.update(extra)
    return env


def run_snakemake(workdir: Path, *args: str, env: dict | None = None, check: bool = True, timeout: int = 900):
    """Run the workflow's CLI on `workdir` with the smoke profile."""
    cmd = [
        SNAKEMAKE,
        "-s", str(REPO / "Snakefile"),
        "--profile", str(REPO / "profiles" / "smoke"),
        "--directory", str(workdir),
        *args,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env or snakemake_env(), timeout=timeout, cwd=workdir
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    return proc


def job_process(snakemake: subprocess.Popen, script: str, timeout: float = 120.0) -> int:
    """The pid of the job process Snakemake started for `script` (its python runs .snakemake/scripts/*<script>)."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in psutil.Process(snakemake.pid).children(recursive=True):
            try:
                if any(arg.endswith(script) for arg in child.cmdline()):
                    return child.pid
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.05)
    raise AssertionError(f"no job running {script} appeared in {timeout} s")


def built_once(tmp_path_factory, name: str, build) -> tuple[Path, float]:
    """`name`'s directory, built by `build(path)` once for the whole test run, and the seconds the build took: under
    pytest-xdist the first worker to ask builds it in the run's shared base directory while the others wait on its
    lock, then all read it. A build that raised leaves no mark: the next worker to ask builds it again (and fails the
    same way, with its own error)."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's directory, above each worker's own
    path, done = base / name, base / f"{name}.built"
    with FileLock(str(base / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
            t0 = time.perf_counter()
            build(path)
            done.write_text(f"{time.perf_counter() - t0:.1f}")
    return path, float(done.read_text())


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """The smoke ladder from an empty working directory, with fake secrets in the environment."""
    workdir, seconds = built_once(tmp_path_factory, "smoke-ladder",
                                  lambda d: run_snakemake(d, "results/ladder.csv", env=snakemake_env(**FAKE_SECRETS)))
    return {"workdir": workdir, "seconds": seconds}


@pytest.fixture(scope="session")
def smoke_generator_dir(tmp_path_factory) -> Path:
    """The tiny qwen_image_edit_plus smoke pipeline at seed 0, built once for tests/test_generate.py and
    tests/test_generate_lora.py (both only read it)."""
    from fourloops.smoke_generators import build_smoke_generator

    out = tmp_path_factory.mktemp("smoke-generator") / "qwen_image_edit_plus"
    build_smoke_generator("qwen_image_edit_plus", str(out), 0)
    return out


# The restyle -> keypoints -> drift -> grades sub-DAG's one style (tests/test_restyle.py, tests/test_grades.py).
INK = {"ink": "Redraw this image as a black ink drawing; keep the person's pose exactly."}


def ink_config(path: Path, styles: dict | None = None, **extra) -> Path:
    """A --configfile restyling `styles` (INK by default) at azimuths 0 and 90, with `extra` top-level keys."""
    import yaml

    path.write_text(yaml.safe_dump({"restyle": {"styles": styles or INK, "azimuths": [0, 90]}} | extra))
    return path


@pytest.fixture(scope="session")
def restyled_graded(smoke_run, tmp_path_factory):
    """The finished smoke ladder's workdir, copied, with one style restyled, detected, drifted and graded
    (2 views, one scoring pass): one run of the sub-DAG that tests/test_restyle.py (restyle, keypoints, drift)
    and tests/test_grades.py (grades) both read. Tests only read it or dry-run on it."""
    def build(root: Path):
        work = root / "work"
        shutil.copytree(smoke_run["workdir"], work, symlinks=True)
        cfg = ink_config(root / "ink.yaml", grades={"num_pass": 1})
        run_snakemake(work, f"--configfile={cfg}", "results/drift/ink.csv", "results/grades/ink.csv")

    root, seconds = built_once(tmp_path_factory, "restyle-grades", build)
    return {"work": root / "work", "config": root / "ink.yaml", "seconds": seconds}


@pytest.fixture
def built_copy(smoke_run, tmp_path):
    """A private copy of the finished smoke workdir (mtimes and .snakemake metadata kept)."""
    dest = tmp_path / "work"
    shutil.copytree(smoke_run["workdir"], dest, symlinks=True)
    return dest


# --- RunPod executor tests (tests/runpod_standin.py): a loopback sshd and a v2 API stand-in ---------
@pytest.fixture(scope="session")
def loopback_sshd(tmp_path_factory):
    """A real sshd on 127.0.0.1 with its own host key; the stand-in's pods log in here."""
    if not Path("/usr/sbin/sshd").exists() or shutil.which("rsync") is None:
        pytest.fail("openssh-server and rsync are needed for the pod executor tests: run bin/setup (it installs them)")
    from runpod_standin import Sshd

    sshd = Sshd(tmp_path_factory.mktemp("sshd"))
    yield sshd
    sshd.stop()


@pytest.fixture
def runpod_standin(loopback_sshd, tmp_path_factory):
    """A RunPod v2 stand-in whose pods are directories behind the loopback sshd; fake API key."""
    from runpod_standin import StandIn

    standin = StandIn(loopback_sshd, tmp_path_factory.mktemp("pods"), FAKE_SECRETS["RUNPOD_API_KEY"])
    yield standin
    standin.close()
