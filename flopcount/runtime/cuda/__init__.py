"""The CUDA backend (CuPy). ``rt.cuda.is_available()`` never raises; using a CUDA tensor without
CuPy or a GPU raises ``DeviceError`` saying how to install."""

from ..device import device as parse_device
from .backend import _import_cupy, is_available, device_count
from .kernels.blas import settings as matmul  # rt.cuda.matmul.allow_tf32, as torch.backends.cuda.matmul


def synchronize(device=None) -> None:
    """Wait for all queued work on a GPU (``"cuda:1"``; the current one by default); a no-op
    without a GPU."""
    if not is_available():
        return
    index = None if device is None else (parse_device(device).index or 0)
    _import_cupy().cuda.Device(index).synchronize()  # Device(None): the current GPU


__all__ = ["is_available", "synchronize", "device_count", "matmul"]
