"""Lines a native library prints on the process's stderr, kept from the user.

PyTorch 2.13's profiler prints a ``USDT:... profiler_start`` and ``profiler_stop`` line from
C++ each time it starts and stops, straight to file descriptor 2, which no Python setting
reaches; a timed run would print two per model. The file descriptor is pointed at a temporary
file around those calls, and whatever else was written there is passed on.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from typing import Iterator


@contextlib.contextmanager
def without_lines(prefix: str) -> Iterator[None]:
    """Drop the lines starting with ``prefix`` that are written to fd 2 inside the block.

    >>> with without_lines("USDT:"):
    ...     pass
    """
    try:
        fd = sys.__stderr__.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):  # no real stderr: nothing to keep clean
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), fd)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, fd)
            os.close(saved)
            captured.seek(0)
            kept = [line for line in captured.read().decode("utf-8", "replace").splitlines(keepends=True)
                    if not line.startswith(prefix)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
