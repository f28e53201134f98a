"""The busy-card guard's decision, with injected NVML readings (busy, free, no GPU)."""

from __future__ import annotations

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
    d = guard.decide([card(5.0)], limit_gib=2.0)
    assert not d.ok and "WSL" in d.message


def test_ensure_card_free_raises_with_the_holders():
    with pytest.raises(guard.CardBusy, match="pid"):
        guard.ensure_card_free(2.0, reader=lambda: [card(20.0, [H(7, "other", 19.0)])])


def test_module_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "fourloops.guard", "--limit-gib", "2"], capture_output=True, text=True)
    assert proc.returncode in (0, 3), proc.stderr
