"""The peak of Python-traced memory while a block runs (numpy reports its buffers to
tracemalloc, so this is what the block's arrays held at most)."""

from __future__ import annotations

import contextlib
import tracemalloc
from dataclasses import dataclass
from typing import Iterator


@dataclass
class PeakMemory:
    peak: int = 0  # bytes, above what was allocated when the block began


@contextlib.contextmanager
def traced_peak() -> Iterator[PeakMemory]:
    """Trace allocations during the block; its ``peak`` is set when the block ends.

        with traced_peak() as memory:
            gm(x)
        assert memory.peak < 2 * 2**20
    """
    memory = PeakMemory()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        yield memory
        memory.peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
