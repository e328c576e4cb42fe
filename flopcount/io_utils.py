"""Writing files so that a reader never sees half of one.

    from flopcount.io_utils import atomic_write
    atomic_write("report.json", text)

The data goes to a temporary file in the target's directory, is flushed to disk, and then
replaces the target in one ``os.replace``. A run that fails or is interrupted before that
leaves the old file (or no file) in place, never a truncated or empty one. A target that is
not a regular file (``/dev/null``, a FIFO, a terminal) is written to directly, as a shell's
``>`` would: renaming over it would replace the device with a file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile


def _new_file_mode(path: str) -> int:
    # mkstemp creates 0600 files; keep the mode an existing target had, or what open() would give
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _sync_directory(directory: str) -> None:
    # makes the rename itself durable; some platforms cannot open a directory, which is fine
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: str | os.PathLike, data: str | bytes, encoding: str = "utf-8") -> None:
    """Write ``data`` to ``path`` atomically: readers see the old content or all of the new.

    A symlink at ``path`` is written through (its target is replaced). On any error, including
    KeyboardInterrupt, the temporary file is removed and ``path`` is untouched; an OSError
    names ``path``. A device or FIFO at ``path`` is written to in place.

    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> atomic_write(target, "hello\\n")
    >>> open(target).read()
    'hello\\n'
    """
    shown = os.fspath(path)
    target = os.path.realpath(shown)
    payload = data.encode(encoding) if isinstance(data, str) else bytes(data)
    try:
        if _is_special(target):
            with open(target, "wb") as f:
                f.write(payload)
            return
        _replace_atomically(target, payload)
    except OSError as exc:
        # name the user's path, never the temporary file's
        raise OSError(exc.errno, exc.strerror or str(exc), shown) from None


def _is_special(target: str) -> bool:
    try:
        return not stat.S_ISREG(os.stat(target).st_mode) and not os.path.isdir(target)
    except FileNotFoundError:
        return False


def _replace_atomically(target: str, payload: bytes) -> None:
    directory = os.path.dirname(target)
    mode = _new_file_mode(target)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _sync_directory(directory)

__all__ = ["atomic_write"]
