"""flopcount.io_utils.atomic_write: the old file or all of the new one, never a part."""

from __future__ import annotations

import os
import stat

import pytest

from flopcount import io_utils
from flopcount.io_utils import atomic_write


def test_writes_text_and_bytes(tmp_path):
    atomic_write(tmp_path / "a.txt", "héllo\n")
    atomic_write(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "héllo\n"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin"]


def test_mode_of_a_new_file_follows_the_umask_and_an_old_file_keeps_its_own(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "new.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new.txt").st_mode) == 0o644
    kept = tmp_path / "kept.txt"
    kept.write_text("old")
    os.chmod(kept, 0o600)
    atomic_write(kept, "new")
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600 and kept.read_text() == "new"


@pytest.mark.parametrize("error", [OSError("disk full"), KeyboardInterrupt()])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, error):
    target = tmp_path / "report.json"
    target.write_text("old content")

    def failing_replace(src, dst):
        assert open(src).read() == "new content"          # the whole new file was ready ...
        raise error                                        # ... when the rename failed

    monkeypatch.setattr(io_utils.os, "replace", failing_replace)
    with pytest.raises(type(error)):
        atomic_write(target, "new content")
    assert target.read_text() == "old content"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_failure_while_writing_creates_nothing(tmp_path, monkeypatch):
    def failing_fsync(fd):
        raise OSError("I/O error")

    monkeypatch.setattr(io_utils.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="I/O error"):
        atomic_write(tmp_path / "fresh.txt", "data")
    assert list(tmp_path.iterdir()) == []


def test_a_symlink_is_written_through_and_a_directory_refused(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    atomic_write(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    (tmp_path / "dir").mkdir()
    with pytest.raises(OSError):
        atomic_write(tmp_path / "dir", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "link.txt", "real.txt"]
