"""Devices and the backend of each: ``cpu`` (numpy), ``cuda`` (CuPy) and ``meta`` (shapes only).

A :class:`Device` names where a tensor lives; :func:`backend` gives the object behind it (the
interface and the CPU and meta backends are in ``backend.py``, CUDA's in ``cuda/backend.py``,
loaded on first use).
"""

from __future__ import annotations

from .backend import Backend, CPUBackend, MetaBackend
from .errors import DeviceError


class Device:
    """A device such as ``cpu``, ``cuda:0`` or ``meta``; compare equal by type and index."""

    __slots__ = ("type", "index")

    def __init__(self, type: str, index: int | None = None):
        self.type = type
        self.index = index

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, Device) and self.type == other.type and (self.index or 0) == (other.index or 0)

    def __hash__(self) -> int:
        return hash((self.type, self.index or 0))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + ("" if self.index is None else f", index={self.index}") + ")"


_DEVICE_CACHE: dict = {}


def device(spec) -> Device:
    """Parse ``'cpu'``, ``'cuda'``, ``'cuda:1'``, ``'meta'`` (or pass a Device through)."""
    if isinstance(spec, Device):
        return spec
    if spec is None:
        return CPU
    cached = _DEVICE_CACHE.get(spec)
    if cached is not None:
        return cached
    if not isinstance(spec, str):
        raise DeviceError(f"device must be a string such as 'cpu', 'cuda:0' or 'meta', got {spec!r}")
    kind, _, index = spec.partition(":")
    if kind not in ("cpu", "cuda", "meta"):
        raise DeviceError(f"unknown device {spec!r}; expected 'cpu', 'cuda', 'cuda:N' or 'meta'")
    if index and not index.isdigit():
        raise DeviceError(f"bad device index in {spec!r}")
    dev = Device(kind, int(index) if index else (0 if kind == "cuda" else None))
    _DEVICE_CACHE[spec] = dev
    return dev


CPU = Device("cpu")
META = Device("meta")


_BACKENDS: dict = {"cpu": CPUBackend(), "meta": MetaBackend()}


def backend(dev: Device) -> Backend:
    """The backend object for a device (CUDA is loaded on first use)."""
    b = _BACKENDS.get(dev.type)
    if b is None:
        if dev.type != "cuda":
            raise DeviceError(f"no backend for device {dev}")
        from .cuda.backend import load_cuda_backend

        b = _BACKENDS["cuda"] = load_cuda_backend()
    if b.per_device:  # that device's backend, made current so new arrays land on it
        return b.backend_for(dev.index)
    return b


def seed_all(seed: int) -> None:
    """Seed every loaded backend's random generator."""
    for b in _BACKENDS.values():
        b.seed(seed)
