"""Opening a model file for reading, refusing what is not a regular file.

A FIFO would block ``open()`` forever and a device (``/dev/zero``, or a symlink to it) would be
read until memory runs out, so the file is opened without blocking and checked with ``fstat``
on the descriptor itself (no window between a check and the open) before a byte is read.

    with open_model_file("model.onnx") as f:
        head = f.read(8)
"""

from __future__ import annotations

import fcntl
import os
import stat

from ..errors import ModelFileError

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def open_model_file(path: str | os.PathLike, encoding: str | None = None):
    """``path`` opened for reading (binary, or text in ``encoding``); a ModelFileError when it
    is missing or is not a regular file (after symlinks are followed)."""
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ModelFileError(f"{path}: is a directory, not a model file") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a file")
            raise ModelFileError(f"{path}: is {kind}, not a regular file; flopcount reads model files only")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    if encoding is None:
        return os.fdopen(fd, "rb")
    return os.fdopen(fd, "r", encoding=encoding)


__all__ = ["open_model_file"]
