"""PyTorch tensors and dtypes as the runtime's, without copying where the dtype allows.

A CPU tensor becomes a runtime tensor over the same memory (``Tensor.numpy()`` shares it); a
tensor on torch's meta device becomes a runtime meta tensor (shape and dtype only); a CUDA
tensor is copied to the host. Only ``torch`` objects handed in by the caller are touched: this
module never imports torch itself.
"""

from __future__ import annotations

import numpy as np

from ..device import CPU, META
from ..dtypes import get_dtype
from ..errors import UnsupportedOpError
from ..tensor import Tensor


def dtype_name(torch_dtype) -> str:
    """``torch.float32`` -> ``'float32'``."""
    return str(torch_dtype).rpartition(".")[2]


def to_dtype(torch_dtype, what: str = "tensor"):
    """The runtime dtype of a torch dtype; an UnsupportedOpError naming ``what`` when the
    runtime has none (complex, float8...)."""
    name = dtype_name(torch_dtype)
    try:
        return get_dtype(name)
    except TypeError:
        raise UnsupportedOpError(f"{what} has dtype {name}, which the flopcount runtime does not have") from None


def from_torch(t, what: str = "tensor") -> Tensor:
    """A runtime tensor for torch tensor ``t``: shares its memory on the CPU, meta on meta."""
    dtype = to_dtype(t.dtype, what)
    shape = tuple(int(d) for d in t.shape)
    if t.device.type == "meta":
        return Tensor._make(None, shape, dtype, META)
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()  # the runtime moves it on with .to(device) when asked
    if dtype_name(t.dtype) == "bfloat16":
        # numpy has no bfloat16: take the bits and view them as the runtime's type
        array = t.view(_same_size_int(t.dtype)).numpy().view(dtype.np)
    else:
        array = t.numpy()
    return Tensor._make(array, shape, dtype, CPU)


def _same_size_int(torch_dtype):
    import torch

    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[torch_dtype.itemsize]


def to_torch(t: Tensor):
    """The torch tensor over a runtime tensor's memory (CPU; meta stays meta)."""
    import torch

    if t.data is None:
        return torch.empty(t.shape, dtype=getattr(torch, t.dtype.name), device="meta")
    return array_to_torch(t.numpy())


def array_to_torch(array):
    """A torch CPU tensor over a numpy array's memory (copied when numpy cannot share it)."""
    import torch

    array = np.asarray(array)
    if not array.flags.writeable or not array.flags.c_contiguous:
        array = np.ascontiguousarray(array).copy()  # torch.from_numpy warns on read-only memory
    if array.dtype.kind == "V" or array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


__all__ = ["dtype_name", "to_dtype", "from_torch", "to_torch", "array_to_torch"]
