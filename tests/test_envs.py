"""The pod environment is installed from a hashed lock that agrees with the project's own pins."""

import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def lock_pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "envs" / "pod.lock").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s\\]+)", line)
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


def test_every_project_pin_is_the_locked_version():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    locked = lock_pins()
    for dep in deps:
        name, version = dep.split("==")
        assert locked.get(name.lower().replace("_", "-")) == version, (dep, locked.get(name.lower()))


def test_every_pod_extra_is_locked_and_every_locked_line_is_hashed():
    locked = lock_pins()
    for line in (REPO / "envs" / "pod.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            assert locked.get(name.strip().lower()) == version.strip(), line
    text = (REPO / "envs" / "pod.lock").read_text()
    assert len(locked) > 50
    assert all("--hash=sha256:" in block for block in re.split(r"\n(?=[A-Za-z0-9_.\-]+==)", text)[1:])


def test_the_pod_setup_installs_the_lock():
    machines = yaml.safe_load((REPO / "config" / "machines.yaml").read_text())
    assert "envs/pod.lock" in machines["pod"]["runpod"]["setup"]


def test_the_omnigen2_install_script_reads_the_pinned_commit_from_where_it_lives():
    # envs/omnigen2.sh runs on every pod's setup: a moved constant would stop the pod before any job
    import re
    import subprocess
    import sys

    script = (REPO / "envs" / "omnigen2.sh").read_text()
    snippet = re.search(r"commit=\$\(python -c '([^']+)'\)", script).group(1)
    out = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, check=True).stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{40}", out), out
