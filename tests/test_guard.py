"""The busy-card guard's decision, with injected NVML readings (busy, free, no GPU)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fourloops import guard

H = guard.Holder


def card(used, holders=()):
    return guard.CardReading(0, "NVIDIA GeForce RTX 3090", 24.0, used, tuple(holders))


def test_busy_card_is_refused_and_the_holders_are_named():
    d = guard.decide([card(15.2, [H(4242, "python ladder.py", 14.8)])], limit_gib=2.0)
    assert not d.ok
    assert "4242" in d.message and "python ladder.py" in d.message and "15.20 GiB" in d.message


def test_free_card_passes():
    assert guard.decide([card(0.6)], limit_gib=2.0).ok


def test_no_gpu_has_nothing_to_guard():
    assert guard.decide(None, limit_gib=2.0).ok
    assert guard.decide([], limit_gib=2.0).ok


def test_own_memory_does_not_count_against_the_limit():
    d = guard.decide([card(10.0, [H(1, "me", 9.0)])], limit_gib=2.0, own_pid=1)
    assert d.ok


def test_wsl_hides_processes_and_the_message_says_so():
    d = guard.decide([card(5.0)], limit_gib=2.0, wsl=True)
    assert not d.ok and "WSL" in d.message


def test_plain_linux_gets_no_wsl_hint():
    d = guard.decide([card(5.0)], limit_gib=2.0, wsl=False)
    assert not d.ok and "WSL" not in d.message


@pytest.mark.parametrize("release, wsl", [("6.6.87.2-microsoft-standard-WSL2\n", True), ("6.8.0-45-generic\n", False)])
def test_wsl_is_read_from_the_kernel_release(tmp_path, release, wsl):
    (tmp_path / "osrelease").write_text(release)
    assert guard.on_wsl(tmp_path / "osrelease") is wsl


def test_a_card_that_does_not_exist_is_not_called_busy():
    d = guard.decide([card(0.1)], limit_gib=2.0, device=3)
    assert not d.ok and d.no_card
    assert "--device 3: no such card" in d.message and "0 (NVIDIA GeForce RTX 3090)" in d.message
    assert "already holds" not in d.message
    with pytest.raises(guard.NoSuchCard, match="--device 3"):
        guard.ensure_card_free(2.0, device=3, reader=lambda: [card(0.1)])


@pytest.mark.parametrize("limit", [0, -1, float("nan"), float("inf"), "lots"])
def test_the_limit_must_be_a_finite_number_above_zero(limit):
    with pytest.raises(ValueError, match=f"busy-card limit = {limit!r}"):
        guard.decide([card(0.1)], limit_gib=limit)


def test_ensure_card_free_raises_with_the_holders():
    with pytest.raises(guard.CardBusy, match="pid"):
        guard.ensure_card_free(2.0, reader=lambda: [card(20.0, [H(7, "other", 19.0)])])


READINGS = {"free": [card(0.6)], "busy": [card(20.0, [H(7, "other", 19.0)])], "none": None}


@pytest.mark.parametrize("argv, readings, code, stream, words", [
    (["--limit-gib", "2"], "free", 0, "out", "free"),
    (["--limit-gib", "2"], "none", 0, "out", "nothing to guard"),
    (["--limit-gib", "2"], "busy", guard.EXIT_BUSY, "err", "pid       7"),
    (["--device", "1"], "free", guard.EXIT_NO_CARD, "err", "--device 1: no such card"),
])
def test_main_exit_status_and_message(monkeypatch, capsys, argv, readings, code, stream, words):
    monkeypatch.setattr(guard, "read_nvml", lambda: READINGS[readings])
    assert guard.main(argv) == code
    assert words in getattr(capsys.readouterr(), stream)


@pytest.mark.parametrize("value", ["0", "-2", "nan", "inf", "lots"])
def test_main_refuses_a_bad_limit_before_reading_the_card(monkeypatch, capsys, value):
    monkeypatch.setattr(guard, "read_nvml", lambda: pytest.fail("read NVML with a bad limit"))
    with pytest.raises(SystemExit) as exit_:
        guard.main(["--limit-gib", value])
    assert exit_.value.code == 2
    assert f"argument --limit-gib: busy-card limit = '{value}'" in capsys.readouterr().err


# A stand-in NVML for the entry point's own process: one 24 GiB card, 19 GiB held by pid 7.
FAKE_PYNVML = """
from types import SimpleNamespace as NS
class NVMLError(Exception): pass
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetCount(): return 1
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetMemoryInfo(h): return NS(total=24 * 2**30, used=19 * 2**30)
def nvmlDeviceGetName(h): return b"NVIDIA GeForce RTX 3090"
def nvmlDeviceGetComputeRunningProcesses(h): return [NS(pid=7, usedGpuMemory=19 * 2**30)]
def nvmlDeviceGetGraphicsRunningProcesses(h): return []
def nvmlSystemGetDriverVersion(): return b"560.94"
"""


@pytest.mark.parametrize("argv, code, words", [
    (["--limit-gib", "2"], guard.EXIT_BUSY, "already holds 19.00 GiB"),
    (["--limit-gib", "20"], 0, "free"),
    (["--device", "1"], guard.EXIT_NO_CARD, "--device 1: no such card"),
])
def test_module_entry_point(tmp_path, argv, code, words):
    (tmp_path / "pynvml.py").write_text(FAKE_PYNVML)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    proc = subprocess.run([sys.executable, "-m", "fourloops.guard", *argv], capture_output=True, text=True, env=env)
    assert proc.returncode == code, proc.stderr
    assert words in proc.stdout + proc.stderr
