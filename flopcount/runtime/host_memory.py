"""How much more host memory this process can take, so that work predicted not to fit is
refused with the predicted figure before anything is allocated, instead of dying halfway with
"out of memory" (or being killed by the kernel).

The figure is the smallest of: what the kernel reports as available (``MemAvailable``: free
memory plus the page cache it can drop), and the room left under the process's own limits
(``ulimit -v``: ``RLIMIT_AS``, and ``RLIMIT_DATA``) after what it already maps. Where none of
these can be read (not Linux), nothing is refused.

    need = weights + activations
    check_fits(need, "--latency on llama2_7b", "count without --latency (shapes only)")
"""

from __future__ import annotations

import os

try:
    import resource
except ImportError:  # not a Unix: no process limits to read
    resource = None

from .errors import ShapeError

GIB = 1 << 30
MIB = 1 << 20


def _meminfo(key: str) -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _mapped_now() -> int | None:
    """Bytes of address space this process maps now (what RLIMIT_AS counts)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def available() -> tuple[int, str] | None:
    """(bytes this process can still allocate, where that limit comes from), or None when the
    system does not say."""
    found = []
    free = _meminfo("MemAvailable")
    if free is not None:
        found.append((free, "available memory"))
    mapped = _mapped_now()
    limits = () if resource is None else ((resource.RLIMIT_AS, "ulimit -v"),
                                          (getattr(resource, "RLIMIT_DATA", None), "ulimit -d"))
    for limit, name in limits:
        if limit is None:
            continue
        soft, _ = resource.getrlimit(limit)
        if soft != resource.RLIM_INFINITY and mapped is not None:
            found.append((max(0, soft - mapped), f"{name} {soft // 1024} KiB"))
    return min(found) if found else None


def check_fits(need: int, what: str, hint: str) -> None:
    """Raise a ShapeError when ``need`` bytes do not fit in what this process can still take."""
    room = available()
    if room is not None and need > room[0]:
        have, source = room
        raise ShapeError(f"{what}: about {_size(need)}, more than the {_size(have)} this process can still use "
                         f"({source}); {hint}")


def _size(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB // 10 else f"{n / MIB:.1f} MiB"


__all__ = ["available", "check_fits"]
