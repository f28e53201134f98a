"""Atomic writes (fourloops.io): the user's umask, and nothing complete-looking from a failed write."""

from __future__ import annotations

import contextlib
import os
import stat

import pytest

from fourloops import io


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
@pytest.mark.parametrize("writer", ["bytes", "json", "image"])
def test_outputs_take_the_users_umask(tmp_path, mask, mode, writer):
    out = tmp_path / "sub" / f"out.{writer}"
    with umask(mask):
        assert io.current_umask() == mask
        if writer == "bytes":
            io.write_bytes(out, b"x")
        elif writer == "json":
            io.write_json(out, {"a": 1})
        else:
            from PIL import Image

            io.save_image(out, Image.new("RGB", (2, 2)))
    assert stat.S_IMODE(out.stat().st_mode) == mode


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "views.json"
    io.write_json(out, {"generation": 1})
    with pytest.raises(RuntimeError):
        with io.atomic_path(out) as tmp:
            tmp.write_text('{"generation": 2, "trunc')
            raise RuntimeError("killed mid-write")
    assert io.read_json(out) == {"generation": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["views.json"]


def test_a_replaced_output_is_a_new_file_not_a_rewrite(tmp_path):
    """fourloops.keep relies on it: a stashed hard link keeps the old bytes."""
    out = tmp_path / "az000.png"
    io.write_bytes(out, b"old")
    os.link(out, tmp_path / "kept")
    io.write_bytes(out, b"new")
    assert (tmp_path / "kept").read_bytes() == b"old" and out.read_bytes() == b"new"


def test_sha256_of_a_file():
    import hashlib, tempfile

    with tempfile.NamedTemporaryFile() as fh:
        fh.write(b"abc" * 1000)
        fh.flush()
        assert io.sha256_file(fh.name, chunk=7) == hashlib.sha256(b"abc" * 1000).hexdigest()
