"""The CPU keeps freed memory for the next op's output (glibc's thresholds raised)."""

import platform
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

# page faults of 20 allocations of an 8 MB array, each written and freed, as the executor does
_FAULTS = textwrap.dedent("""
    import resource, sys
    import numpy as np
    if sys.argv[1] == "keep":
        from flopcount.runtime.allocator import keep_freed_memory
        assert keep_freed_memory()
    np.ones(2 << 20, np.float32)  # the first one always faults in
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        a = np.ones(2 << 20, np.float32)
        del a
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _FAULTS, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_freed_blocks_are_reused_instead_of_faulted_in_again():
    unmapped, kept = _faults("default"), _faults("keep")
    # by default each 8 MB array is a fresh mapping (2048 faults of 4 KB, fewer with huge pages)
    assert unmapped > 200
    assert kept < unmapped / 10


def test_graph_runs_on_the_cpu_ask_for_it(monkeypatch):
    import flopcount.runtime as rt
    from flopcount.runtime import allocator

    monkeypatch.setattr(allocator, "_result", None)
    graph = rt.compile(rt.nn.Linear(4, 2))
    graph(rt.randn(3, 4))
    assert allocator._result is not None
