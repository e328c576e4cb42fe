"""The CUDA backend (CuPy). ``rt.cuda.is_available()`` never raises; using a CUDA tensor without
CuPy or a GPU raises ``DeviceError`` saying how to install."""

from .backend import is_available, synchronize, device_count

__all__ = ["is_available", "synchronize", "device_count"]
