"""bench/gpu_run.sh's guard before a lent GPU's minutes go to a run: the tree carried must be the commit whose bundle
`prepare` made, or every record the run writes names that commit, dirty (the thirty-sixth run's, 2026-12-06)."""

from __future__ import annotations

import shutil
import subprocess

from conftest import REPO


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def _repo(tmp_path):
    """A repository holding bench/gpu_run.sh and probe.py, committed once."""
    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True)
    shutil.copy(REPO / "bench" / "gpu_run.sh", repo / "bench" / "gpu_run.sh")
    (repo / "probe.py").write_text("A = 1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")
    return repo


def _bundle(repo) -> str:
    """What `prepare` does: HEAD as .carry/repo.bundle; its commit."""
    (repo / ".carry").mkdir()
    _git(repo, "bundle", "create", "-q", ".carry/repo.bundle", "HEAD")
    return _git(repo, "rev-parse", "HEAD")


def _gpu_run(repo, tmp_path, mode: str, **env):
    return subprocess.run(["bash", str(repo / "bench" / "gpu_run.sh"), mode], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env}, timeout=60)


def test_start_refuses_a_tree_committed_after_its_bundle_and_moves_no_branch(tmp_path):
    repo = _repo(tmp_path)
    bundled = _bundle(repo)
    (repo / "probe.py").write_text("A = 2\n")  # committed after `prepare`
    _git(repo, "commit", "-qam", "two")
    head = _git(repo, "rev-parse", "HEAD")

    run = tmp_path / "run"
    proc = _gpu_run(repo, tmp_path, "start", RUN=str(run))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"STALE BUNDLE: the tree is not .carry/repo.bundle's commit {bundled[:7]}" in proc.stderr
    assert "probe.py" in proc.stderr and "prepare after the last commit" in proc.stderr
    assert not run.exists()  # no run started
    assert _git(repo, "rev-parse", "HEAD") == head and _git(repo, "status", "--porcelain", "--untracked-files=no") == ""


def test_the_tree_is_its_bundles_commit_whatever_commit_the_copied_index_names(tmp_path):
    # a lent machine's copy of the tree can carry a .git whose HEAD and index are an earlier commit: the files the
    # bundle's commit added are then missing from that index (the thirty-eighth run's first start was refused so)
    repo = _repo(tmp_path)
    earlier = _git(repo, "rev-parse", "HEAD")
    (repo / "records.json").write_text("{}\n")  # added by the bundle's commit
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "two")
    bundled = _bundle(repo)
    _git(repo, "reset", "-q", earlier)  # HEAD and index one; the tree still two

    proc = _gpu_run(repo, tmp_path, "check")
    assert proc.returncode == 0 and f"the tree is .carry/repo.bundle's commit {bundled[:7]}" in proc.stdout, (
        proc.stdout + proc.stderr)
    (repo / "records.json").write_text('{"edited": 1}\n')  # and a tree that is not the bundle's is still refused
    proc = _gpu_run(repo, tmp_path, "check")
    assert proc.returncode == 2 and "records.json" in proc.stderr and "STALE BUNDLE" in proc.stderr
