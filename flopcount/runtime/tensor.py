"""The Tensor: data (numpy, cupy, or None on meta), shape, dtype, device and autograd state.

Every operator and method that computes something calls a registered op, so all arithmetic goes
through the dispatcher. In-place methods (``add_``, ``zero_``, ``copy_``...) write the data
directly and are meant for initialization and optimizers, under ``no_grad``.
"""

from __future__ import annotations

from math import prod

import numpy as np

from . import dtypes as _dt
from .device import META, Device, backend, device as parse_device
from .errors import DeviceError, ShapeError
from .random import random_array


class Tensor:
    """An n-dimensional array with autograd, on ``cpu``, ``cuda`` or ``meta``.

    >>> import flopcount.runtime as rt
    >>> x = rt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad.tolist()
    [[2.0, 4.0], [6.0, 8.0]]
    """

    # _trace: a recorder's note on the tensor while a run is recorded (recording/recorder.py),
    # None otherwise; it lives and dies with the tensor, so the recorder needs no table by id
    __slots__ = ("data", "shape", "dtype", "device", "requires_grad", "grad", "_node", "_value",
                 "_trace", "__weakref__")
    __array_priority__ = 1000  # numpy scalars on the left defer to our operators

    def __init__(self, data, dtype=None, device=None, requires_grad: bool = False):
        t = tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
        self.data, self.shape, self.dtype, self.device = t.data, t.shape, t.dtype, t.device
        self.requires_grad, self.grad, self._node, self._value = requires_grad, None, None, None
        self._trace = None

    @classmethod
    def _make(cls, data, shape: tuple, dtype, device: Device, requires_grad: bool = False):
        t = object.__new__(cls)
        t.data = data
        t.shape = shape
        t.dtype = dtype
        t.device = device
        t.requires_grad = requires_grad
        t.grad = None
        t._node = None
        t._value = None
        t._trace = None
        return t

    # --- information ---------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        return prod(self.shape)

    nelement = numel

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the elements packed at the dtype's size in bits (int4: half a byte each)."""
        return self.dtype.nbytes(prod(self.shape))

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self):
        return self._node

    @property
    def is_meta(self) -> bool:
        return self.device.type == "meta"

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        dev = "" if self.device.type == "cpu" else f", device='{self.device}'"
        if self.data is None:
            return f"tensor(..., size={self.shape}, dtype={self.dtype.name}{dev}{grad})"
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(", threshold=100)
        return f"tensor({body}, dtype={self.dtype.name}{dev}{grad})"

    # --- data out ------------------------------------------------------------------------
    def _need_data(self, what: str):
        if self.data is None:
            raise DeviceError(f"{what}: a meta tensor (shape {self.shape}) has no data")
        return self.data

    def numpy(self) -> np.ndarray:
        """The data as a numpy array (copied from the GPU when needed)."""
        if self.requires_grad and self._node is not None:
            pass  # reading values of a non-leaf is fine; it does not detach the graph
        array = backend(self.device).to_numpy(self._need_data("numpy()"))
        return array if array.dtype == self.dtype.np else array.astype(self.dtype.np)  # held widened

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self.numel() != 1:
            raise ShapeError(f"item(): only one-element tensors have an item, got shape {self.shape}")
        return self.numpy().reshape(()).item()

    def tolist(self):
        return self.numpy().tolist()

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        return arr.astype(dtype) if dtype is not None else arr

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype._rank > 1:
            raise TypeError("only integer tensors can be used as an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"the truth value of a tensor with shape {self.shape} is ambiguous")
        return bool(self.item())

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # --- moving and converting -------------------------------------------------------------
    def to(self, *args, **kwargs) -> "Tensor":
        """``t.to("cuda")``, ``t.to(rt.float16)``, ``t.to("cpu", rt.float64)``, ``t.to(other)``."""
        dev = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("copy", None)
        if kwargs:
            raise TypeError(f"to(): unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dev, dtype = a.device, a.dtype
            elif isinstance(a, Device) or (isinstance(a, str) and a.partition(":")[0] in ("cpu", "cuda", "meta")):
                dev = a
            else:
                dtype = a
        out = self
        if dtype is not None and _dt.get_dtype(dtype) is not self.dtype:
            out = _ew.cast(out, _dt.get_dtype(dtype))
        if dev is not None:
            out = out._to_device(parse_device(dev))
        return out

    def _to_device(self, dev: Device) -> "Tensor":
        if dev == self.device:
            return self
        if dev.type == "meta" or self.data is None:
            data = None if dev.type == "meta" else backend(dev).xp.zeros(self.shape, backend(dev).storage(self.dtype))
            if dev.type == "meta" and self.data is not None:
                from .dispatch import state

                if state.tracer is not None:  # the tracer keeps the value as a graph constant
                    data = backend(self.device).to_numpy(self.data)
            if self.data is None and dev.type != "meta":
                raise DeviceError(f"cannot move a meta tensor (shape {self.shape}) to {dev}: it has no data")
        else:
            data = backend(dev).asarray(backend(self.device).to_numpy(self.data), self.dtype)
        out = Tensor._make(data, self.shape, self.dtype, dev, self.requires_grad and self._node is None)
        return out

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def cuda(self, index: int = 0) -> "Tensor":
        return self.to(f"cuda:{index}")

    # float(), double(), half(), bfloat16(), long(), int(), bool(): see _CASTS at the end

    def type_as(self, other: "Tensor") -> "Tensor":
        return self.to(other.dtype)

    def detach(self) -> "Tensor":
        """The same data, cut from the autograd graph (while tracing, the same graph value)."""
        out = Tensor._make(self.data, self.shape, self.dtype, self.device)
        out._value = self._value
        return out

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if requires_grad and not self.dtype.is_floating_point:
            raise ShapeError(f"only floating point tensors can require gradients, got {self.dtype.name}")
        self.requires_grad = requires_grad
        return self

    def backward(self, gradient=None, retain_graph: bool = False, create_graph: bool = False) -> None:
        """Compute gradients of this tensor with respect to the leaves that require grad."""
        _autograd.backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph)

    def clone(self) -> "Tensor":
        return _mv.contiguous(self, force_copy=True)

    # --- in-place data writes (initializers, optimizers) -------------------------------------
    @property
    def _writable(self) -> bool:
        # a meta tensor may carry a constant for the tracer, but in-place writes never apply to
        # it; nor do they while only shapes run: a memory prediction leaves real tensors (a
        # BatchNorm's running statistics, an add_ on a weight) as they were
        from .dispatch import state

        return self.data is not None and self.device.type != "meta" and not state.shapes_only

    def _own_data(self, keep: bool = True):
        """``data``, ready to be written in place. An array adopted read-only (an imported
        model's weights are views of the file's bytes) is replaced by a copy first, once
        (copy-on-write: the write changes this tensor, never the bytes it was read from);
        ``keep=False`` when the write replaces every value, so nothing needs copying."""
        data = self.data
        if not getattr(data.flags, "writeable", True):  # CuPy arrays have no such flag: writable
            xp = backend(self.device).xp
            data = self.data = xp.array(data, copy=True) if keep else xp.empty(data.shape, data.dtype)
        return data

    def _write(self, array) -> "Tensor":
        if not self._writable:
            return self
        be = backend(self.device)
        arr = be.asarray(array, self.dtype)
        if arr.shape != self.shape:
            arr = be.xp.broadcast_to(arr, self.shape)
        self._own_data(keep=False)[...] = arr
        return self

    def _other_data(self, other):
        if isinstance(other, Tensor):
            if other.data is None:
                return None
            return other.data if other.device == self.device else backend(self.device).asarray(
                other.numpy(), self.dtype)
        return other

    def copy_(self, src) -> "Tensor":
        if not self._writable:
            return self
        if isinstance(src, Tensor) and tuple(src.shape) != self.shape and prod(src.shape) != prod(self.shape):
            raise ShapeError(f"copy_(): source shape {src.shape} does not fit {self.shape}")
        return self._write(self._other_data(src))

    def zero_(self) -> "Tensor":
        return self._write(0)

    def fill_(self, value) -> "Tensor":
        return self._write(value)

    def add_(self, other, alpha=1) -> "Tensor":
        if self._writable:
            other = self._other_data(other)
            data = self._own_data()
            data += alpha * other if alpha != 1 else other
        return self

    def sub_(self, other, alpha=1) -> "Tensor":
        return self.add_(other, alpha=-alpha)

    def mul_(self, other) -> "Tensor":
        if self._writable:
            other = self._other_data(other)
            data = self._own_data()
            data *= other
        return self

    def div_(self, other) -> "Tensor":
        if self._writable:
            other = self._other_data(other)
            data = self._own_data()
            data /= other
        return self

    def clamp_(self, min=None, max=None) -> "Tensor":
        if self._writable:
            data = self._own_data()
            backend(self.device).xp.clip(data, min, max, out=data)
        return self

    def uniform_(self, a: float = 0.0, b: float = 1.0) -> "Tensor":
        if self._writable:
            # drawn on the CPU generator, so a seed gives the same weights on every device
            self._write(random_array("cpu", "uniform", self.shape, self.dtype, a, b))
        return self

    def normal_(self, mean: float = 0.0, std: float = 1.0) -> "Tensor":
        if self._writable:
            self._write(random_array("cpu", "normal", self.shape, self.dtype, mean, std))
        return self

    # --- Python operators ------------------------------------------------------------------
    # (the arithmetic, comparison and logic operators are their ops: see _OPERATORS at the end)
    def __pos__(self):
        return self

    __hash__ = object.__hash__

    def __getitem__(self, index):
        return _ix.getitem(self, index)

    def __setitem__(self, index, value) -> None:
        _ix.setitem_(self, index, value)

    # --- methods that forward to ops ----------------------------------------------------------
    @property
    def T(self):
        return _mv.permute(self, tuple(reversed(range(self.ndim))))

    @property
    def mT(self):
        return _mv.transpose(self, -2, -1)

    def reshape(self, *shape):
        return _mv.reshape(self, _shape_args(shape))

    def view(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], (int, tuple, list)) and not hasattr(shape[0], "__index__"):
            return self.to(shape[0])  # view(dtype) is not supported as reinterpretation; cast
        return _mv.reshape(self, _shape_args(shape))

    def view_as(self, other):
        return _mv.reshape(self, other.shape)

    reshape_as = view_as

    def permute(self, *dims):
        return _mv.permute(self, _shape_args(dims))

    def t(self):
        if self.ndim > 2:
            raise ShapeError(f"t(): expects a tensor with <= 2 dimensions, got shape {self.shape}")
        return _mv.transpose(self, 0, 1) if self.ndim == 2 else self

    def expand(self, *sizes):
        return _mv.expand(self, _shape_args(sizes))

    def expand_as(self, other):
        return _mv.expand(self, other.shape)

    def repeat(self, *sizes):
        return _mv.repeat(self, _shape_args(sizes))

    def split(self, split_size, dim: int = 0):
        return _mv.split(self, split_size, dim)

    def matmul(self, other):
        return _la.matmul(self, other)

    mm = matmul

    def bmm(self, other):
        return _la.bmm(self, other)

    def square(self):
        return _ew.mul(self, self)

    def pow(self, exponent):
        return _ew.pow(self, exponent)

    def add(self, other, alpha=1):
        return _ew.add(self, other if alpha == 1 else _ew.mul(other, alpha))

    def sub(self, other, alpha=1):
        return _ew.sub(self, other if alpha == 1 else _ew.mul(other, alpha))

    def softmax(self, dim: int):
        return _act.softmax(self, dim)

    def log_softmax(self, dim: int):
        return _act.log_softmax(self, dim)

    def where(self, condition, other):
        return _ew.where(condition, self, other)

    def new_zeros(self, *size, dtype=None, device=None):
        return _fac.zeros(*size, dtype=dtype or self.dtype, device=device or self.device)

    def new_ones(self, *size, dtype=None, device=None):
        return _fac.ones(*size, dtype=dtype or self.dtype, device=device or self.device)

    def new_full(self, size, fill_value, dtype=None, device=None):
        return _fac.full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device)

    def new_tensor(self, data, dtype=None, device=None):
        return tensor(data, dtype=dtype or self.dtype, device=device or self.device)


def _shape_args(shape) -> tuple:
    """Accept ``f(2, 3)``, ``f((2, 3))`` and ``f([2, 3])`` alike."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple(int(s) for s in shape)


def _infer_dtype(data):
    if isinstance(data, bool):
        return _dt.bool_
    if isinstance(data, (int, np.integer)):
        return _dt.int64
    if isinstance(data, (float, np.floating)):
        return _dt.default_float
    return None


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (lists, scalars, numpy or cupy arrays, Tensors).

    Python floats become float32 and ints int64; numpy arrays keep their dtype.

    >>> tensor([1, 2, 3]).dtype
    flopcount.int64
    """
    from .dispatch import state

    dev = parse_device(device) if device is not None else state.default_device
    if isinstance(data, Tensor):
        out = data.detach().to(dev)
        if dtype is not None:
            out = out.to(dtype)
        if out is data or out.data is data.data:
            out = out.clone().detach()
        return out.requires_grad_(requires_grad) if requires_grad else out
    if dtype is None:
        dtype = _infer_dtype(data)
    if dtype is None:
        arr = np.asarray(data) if not hasattr(data, "__cuda_array_interface__") else data
        if arr.dtype == np.float64 and not isinstance(data, np.ndarray) and not hasattr(data, "__cuda_array_interface__"):
            dtype = _dt.default_float  # nested Python floats, as in PyTorch
        elif arr.dtype.kind in "iu" and arr.dtype not in _dt.NUMPY_DTYPES:
            dtype = _dt.int64  # a platform integer type that is none of ours (np.longlong...)
        else:
            dtype = _dt.get_dtype(arr.dtype)
    dtype = _dt.get_dtype(dtype)
    if dev.type == "meta":
        # A meta tensor may carry a small constant value for the tracer; it is never computed on.
        arr = np.array(data.get() if hasattr(data, "get") else data, dtype=dtype.np, copy=True)
        keep = arr.size <= 1 << 16 or state.tracer is not None  # a tracer keeps any constant
        t = Tensor._make(arr if keep else None, arr.shape, dtype, META)
    else:
        be = backend(dev)
        src = data.get() if (dev.type == "cpu" and hasattr(data, "get")) else data
        arr = be.asarray(src, dtype) if dtype in be.stored_as else be.xp.array(src, dtype=dtype.np, copy=True)
        t = Tensor._make(arr, tuple(arr.shape), dtype, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


from . import autograd as _autograd  # noqa: E402
from . import factories as _fac  # noqa: E402
from .ops import elementwise as _ew  # noqa: E402
from .ops import movement as _mv  # noqa: E402
from .ops import indexing as _ix  # noqa: E402
from .ops import reduction as _red  # noqa: E402
from .ops import linalg as _la  # noqa: E402
from .ops import activations as _act  # noqa: E402

# Methods that are the functional op of the same name with the tensor first (``x.sum(1)`` is
# ``sum(x, 1)``): the functions themselves, so a method shows its op's signature and doc string.
_OP_METHODS = {
    _ew: "exp log sqrt rsqrt abs neg sin cos tanh erf reciprocal clamp floor ceil round sign logical_not isnan isinf "
         "masked_fill mul div maximum minimum eq ne lt gt le ge",
    _mv: "contiguous transpose flatten unflatten squeeze unsqueeze chunk narrow flip roll",
    _ix: "gather index_select tril triu",
    _red: "sum mean max min amax amin argmax argmin var std logsumexp prod all any norm cumsum",
    _act: "sigmoid relu",
}
for _module, _names in _OP_METHODS.items():
    for _name in _names.split():
        setattr(Tensor, _name, getattr(_module, _name))
Tensor.clip = _ew.clamp


def _cast_to(dtype):
    def method(self) -> Tensor:
        return self.to(dtype)

    return method


# ``x.float()`` is ``x.to(float32)``, and so on
_CASTS = {"float": _dt.float32, "double": _dt.float64, "half": _dt.float16, "bfloat16": _dt.bfloat16,
          "long": _dt.int64, "int": _dt.int32, "bool": _dt.bool_}
for _name, _dtype in _CASTS.items():
    setattr(Tensor, _name, _cast_to(_dtype))


def _reflected(op):
    """``other <op> tensor`` for a number (or array) on the left."""

    def method(self, other):
        return op(other, self)

    return method


# Python's operators: ``a + b`` is ``add(a, b)``; the reflected forms put the tensor second; the
# in-place ones (``out += x``) rebind the name to a new tensor, so the graph stays valid.
_OPERATORS = {"add": _ew.add, "sub": _ew.sub, "mul": _ew.mul, "truediv": _ew.div, "pow": _ew.pow,
              "matmul": _la.matmul, "floordiv": _ew.floor_divide, "mod": _ew.remainder, "neg": _ew.neg, "abs": _ew.abs,
              "invert": _ew.logical_not, "and": _ew.logical_and, "or": _ew.logical_or, "xor": _ew.logical_xor,
              "eq": _ew.eq, "ne": _ew.ne, "lt": _ew.lt, "le": _ew.le, "gt": _ew.gt, "ge": _ew.ge}
for _name, _op in _OPERATORS.items():
    setattr(Tensor, f"__{_name}__", _op)
for _name in ("add", "sub", "mul", "truediv", "pow", "matmul"):
    setattr(Tensor, f"__r{_name}__", _reflected(_OPERATORS[_name]))
for _name in ("add", "sub", "mul", "truediv"):
    setattr(Tensor, f"__i{_name}__", _OPERATORS[_name])
