"""Small helpers the shape rules share: broadcasting, dim normalization, scalar operands."""

from __future__ import annotations

from .. import dtypes as _dt
from ..errors import ShapeError
from ..registry import Spec
from ..tensor import Tensor


def broadcast_shapes(op: str, a: tuple, b: tuple) -> tuple:
    """NumPy/PyTorch broadcasting of two shapes; a ShapeError names the op and both shapes."""
    if a == b:
        return a
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ShapeError(f"{op}: shapes {tuple(a)} and {tuple(b)} cannot be broadcast together")
    return tuple(out)


def check_ints(op: str, **values) -> None:
    """Every named tuple of sizes (kernel_size=(3, 3), stride=...) holds Python ints; a value
    read from a file can be anything, and a float size only fails deep in a kernel."""
    for name, value in values.items():
        if not isinstance(value, (tuple, list)) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                           for v in value):
            raise ShapeError(f"{op}: {name} {value!r} must be a tuple of integers")


def norm_dim(op: str, dim: int, ndim: int) -> int:
    """A dim in [-ndim, ndim) made non-negative; a ShapeError otherwise."""
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise ShapeError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dimension(s)")
    return dim % max(ndim, 1)


def norm_dims(op: str, dim, ndim: int) -> tuple:
    """``None`` -> all dims; an int or a sequence -> a sorted tuple of non-negative dims."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    dims = tuple(sorted({norm_dim(op, d, ndim) for d in dim}))
    return dims


def as_tensor(value, like: Tensor, dtype=None) -> Tensor:
    """Wrap a Python scalar as a 0-d tensor next to ``like`` (its device; dtype by PyTorch's rule).

    On meta the value is still held, so a tracer can keep it as a constant of the graph.
    """
    if isinstance(value, Tensor):
        return value
    import numpy as np

    dtype = dtype or _dt.scalar_dtype(value, like.dtype)
    dev = like.device
    if dev.type == "meta":
        data = np.asarray(value, dtype=dtype.np)
    else:
        from ..device import backend

        data = backend(dev).xp.asarray(value, dtype=dtype.np)
    return Tensor._make(data, (), dtype, dev)


def operands(op: str, a, b) -> tuple:
    """Turn a binary op's arguments into two tensors (at least one must be a tensor)."""
    a_is, b_is = isinstance(a, Tensor), isinstance(b, Tensor)
    if a_is and b_is:
        return a, b
    if a_is:
        return a, as_tensor(b, a)
    if b_is:
        return as_tensor(a, b), b
    raise TypeError(f"{op}: expected at least one tensor, got {type(a).__name__} and {type(b).__name__}")


def same_spec(x) -> Spec:
    return Spec(x.shape, x.dtype, x.device)


def float_dtype(dtype):
    """The dtype a float-valued op returns for an input of ``dtype`` (ints become float32)."""
    return dtype if dtype.is_floating_point else _dt.default_float


def check_float(op: str, x) -> None:
    if not x.dtype.is_floating_point:
        raise ShapeError(f"{op}: expects a floating point tensor, got {x.dtype.name} of shape {x.shape}")


def upcast_half(array):
    """A float16 or bfloat16 kernel operand as float32, for kernels that accumulate (statistics,
    matmuls, softmax) and would lose precision in half; other arrays (and None) pass through.
    (On the CPU the dispatcher has widened them already; CUDA runs half types as they are.)"""
    # itemsize first: numpy builds ``dtype.name`` in Python on every access, which was a large
    # share of a small conv's time in the executor
    if array is not None and array.dtype.itemsize == 2 and array.dtype.name in ("float16", "bfloat16"):
        return array.astype("float32")
    return array


# --- the spatial functional API (conv, pooling) --------------------------------------------------

def ntuple(fn: str, name: str, value, n: int) -> tuple:
    """A size argument of ``fn`` (kernel_size, stride, ...) as ``n`` ints: an int or a single
    value is repeated; any other length than 1 or ``n`` is a ShapeError naming ``name``."""
    if isinstance(value, int):
        return (value,) * n
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise ShapeError(f"{fn}: {name} needs 1 or {n} values, got {value}")
    return value


def batched(fn: str, x, nd: int) -> tuple:
    """(x with a batch dim, whether one was added): unbatched (C, *spatial) input is allowed."""
    from .movement import unsqueeze

    if x.ndim == nd + 1:
        return unsqueeze(x, 0), True
    if x.ndim != nd + 2:
        raise ShapeError(f"{fn}: expected a {nd + 1}-d (unbatched) or {nd + 2}-d (batched) input, "
                         f"got shape {x.shape}")
    return x, False


def unbatched(y, added: bool):
    """``y`` without the batch dim ``batched`` added (as it was given)."""
    from .movement import squeeze

    return squeeze(y, 0) if added else y
