"""How much more memory this process can take on a device, so that work predicted not to fit
is refused with the predicted figure before anything is allocated, instead of dying halfway
with "out of memory" (or being killed by the kernel).

On the CPU the figure is the smallest of: what the kernel reports as available
(``MemAvailable``: free memory plus the page cache it can drop), and the room left under the
process's own limits (``ulimit -v``: ``RLIMIT_AS``, and ``RLIMIT_DATA``) after what it already
maps. Where none of these can be read (not Linux), nothing is refused. On a GPU it is the
device's free memory (``cudaMemGetInfo``) plus what CuPy's pool holds unused. The meta device
allocates nothing and is never refused.

    need = weights + activations
    check_fits(need, "--latency on llama2_7b", "count without --latency (shapes only)")
"""

from __future__ import annotations

import os

try:
    import resource
except ImportError:  # not a Unix: no process limits to read
    resource = None

from .errors import MemoryLimitError

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


def gpu_available(device) -> tuple[int, str]:
    """(bytes free on the GPU ``device``, where that figure comes from)."""
    from .device import backend, device as as_device

    return backend(as_device(device)).free_memory(), f"free on {device}"


def available_on(device) -> tuple[int, str] | None:
    """What :func:`available` says for the CPU, :func:`gpu_available` for a GPU; None for meta."""
    kind = getattr(device, "type", str(device).partition(":")[0])
    if kind == "cpu":
        return available()
    if kind == "cuda":
        return gpu_available(device)
    return None


def check_fits(need: int, what: str, hint: str, device="cpu") -> None:
    """Raise a MemoryLimitError (a ShapeError) when ``need`` bytes do not fit in what this
    process can still take on ``device``.

    >>> check_fits(1 << 20, "a 1 MiB buffer", "use less", device="meta")   # meta: always fits
    """
    room = available_on(device)
    if room is not None and need > room[0]:
        have, source = room
        raise MemoryLimitError(f"{what}: about {_size(need)}, more than the {_size(have)} this process can "
                               f"still use ({source}); {hint}")


def _size(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB // 10 else f"{n / MIB:.1f} MiB"


__all__ = ["available", "available_on", "check_fits", "gpu_available"]
