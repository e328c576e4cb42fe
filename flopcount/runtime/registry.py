"""The op registry: every operator defined once, its four rules side by side.

    @register_op("relu")
    class Relu(Op):
        def shape(x): ...                  # output Spec(s); raises ShapeError quoting shapes
        def forward(xp, x): ...            # kernel on arrays (numpy or cupy)
        def vjp(g, out, x): ...            # gradients, written with registered ops
        def cost(out, x): ...              # shape-only Cost (macs, flops, bytes)

A kernel or gradient that an op deliberately lacks is declared ``None`` with a comment (``vjp =
None`` for argmax); the shape and cost rules are never ``None``, so whoever prices an op can call
its cost rule. ``register_op`` refuses a duplicate name and an op that leaves a rule out.
"""

from __future__ import annotations

from math import prod
from typing import Callable, Iterable

from .dtypes import DType
from .device import Device

RULES = ("shape", "forward", "vjp", "cost")
REQUIRED_RULES = ("shape", "cost")  # never None: every op has shapes and a price


class Spec:
    """Shape, dtype and device of a value: what shape rules take and return.

    Tensors have the same three attributes, so rules accept tensors and specs alike.
    """

    __slots__ = ("shape", "dtype", "device")

    def __init__(self, shape: tuple, dtype: DType, device: Device):
        self.shape = shape
        self.dtype = dtype
        self.device = device

    def numel(self) -> int:
        return prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __eq__(self, other) -> bool:
        return (isinstance(other, Spec) and self.shape == other.shape and self.dtype is other.dtype
                and self.device == other.device)

    def __repr__(self) -> str:
        return f"Spec({self.shape}, {self.dtype.name}, {self.device})"


def numel(spec) -> int:
    return prod(spec.shape)


def nbytes(spec) -> int:
    """Bytes of a tensor or spec at its dtype's element size in bits (int4: half a byte)."""
    return spec.dtype.nbytes(prod(spec.shape))


class Cost:
    """What one op costs, from shapes alone (see COUNTING.md for the rule of each op)."""

    __slots__ = ("macs", "flops", "bytes_read", "bytes_written")

    def __init__(self, macs: int = 0, flops: int = 0, bytes_read: int = 0, bytes_written: int = 0):
        self.macs = macs
        self.flops = flops
        self.bytes_read = bytes_read
        self.bytes_written = bytes_written

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(self.macs + other.macs, self.flops + other.flops,
                    self.bytes_read + other.bytes_read, self.bytes_written + other.bytes_written)

    def __eq__(self, other) -> bool:
        return isinstance(other, Cost) and self.as_tuple() == other.as_tuple()

    def as_tuple(self) -> tuple:
        return (self.macs, self.flops, self.bytes_read, self.bytes_written)

    def __repr__(self) -> str:
        return (f"Cost(macs={self.macs}, flops={self.flops}, bytes_read={self.bytes_read}, "
                f"bytes_written={self.bytes_written})")


def io_cost(out, inputs: Iterable, macs: int = 0, flops: int = 0) -> Cost:
    """A Cost whose bytes are every input read once and every output written once, each at its
    dtype's element size in bits (a 4-bit tensor of 1000 elements is 500 bytes)."""
    # plain loops: every counted op comes through here, thousands of times for a large model
    read = 0
    for t in inputs:
        if t is not None:
            read += t.dtype.nbytes(prod(t.shape))
    if isinstance(out, (tuple, list)):
        written = 0
        for o in out:
            written += o.dtype.nbytes(prod(o.shape))
    else:
        written = out.dtype.nbytes(prod(out.shape))
    return Cost(macs, flops, read, written)


ZERO_COST = Cost()

# what an op's ``view`` rule says of its output: a new array, a contiguous view of input 0, or a
# view of it that is not contiguous (permuted, broadcast, sliced with a step)
COPY, VIEW, STRIDED = "copy", "view", "strided"


def no_cost(out, *inputs, **attrs) -> Cost:
    """Cost rule of a view (reshape, transpose, expand): no arithmetic and no bytes moved."""
    return ZERO_COST


class Op:
    """Base of every registered op. Subclasses define ``shape``, ``forward``, ``vjp``, ``cost``
    as plain functions (no ``self``); ``kernels`` maps a device type to a faster kernel."""

    name: str = "?"
    kernels: dict = {}
    random: bool = False  # draws random numbers: never folded to a constant while tracing
    # The fifth rule, SBP (runtime/sbp.py): ``sbp(out, *inputs, **attrs)`` lists the signatures
    # the op accepts on one mesh axis. None: only "everything B" (each rank runs the whole op),
    # which the sharding pass always adds itself.
    sbp = None
    # A layout op (a view: reshape, permute, expand, slicing) moves no data, so the sharding
    # pass moves SBP through it both ways and applies boxing to its source instead.
    layout: bool = False

    @staticmethod
    def shard_attrs(attrs: dict, signature, n: int, index: int, out, *inputs) -> dict:
        """The attrs rank ``index`` of ``n`` runs the op with under ``signature``, given the
        global specs. Ops whose attrs hold sizes (a reshape's target shape, a slice's bounds)
        localize them; the others run with their attrs unchanged."""
        return attrs

    # does arithmetic on values: inputs in a dtype the backend has no arithmetic for (bfloat16,
    # float8, int4 on numpy) reach its kernel widened (Backend.compute_dtypes), and the result
    # is rounded back; False for ops that only move or select elements, which take any storage
    computes: bool = True
    # attention: how many sweeps of the (Lq, Lk) score matrix its MACs are (0: not attention); a
    # counting policy that leaves out a causal mask's hidden half reads it
    score_contractions: int = 0
    # False for an op whose arithmetic nobody knows (an imported op with no mapping): no
    # convention has a rule for it, so reports count it as zero and list it as unsupported
    priced: bool = True
    # a function attrs -> the name reports list an unpriced call under, for an op that stands for
    # something else (an imported file's node without a mapping: ``ONNX TopK``); None: the op's name
    unsupported_label = None
    # a gradient op, dispatched only by another op's vjp (max_pool_backward, conv_weight_grad)
    backward: bool = False
    # whether output 0 shares input 0's storage, as numpy and CuPy make it: None (never: a new
    # array), or a function (x_contiguous, x, out, **attrs) -> COPY, VIEW (a contiguous view) or
    # STRIDED (a view that is not contiguous). Liveness and the eager memory prediction read it.
    view = None
    # the ONNX operator that computes the op as it is: same inputs, cast to the output dtype (to
    # their promoted dtype for a bool output: a comparison, IsNaN), no attributes. Export writes
    # that one node unless the op has an emitter of its own (runtime/onnx/emitters/), which an
    # op whose ONNX form needs attributes or a chain of nodes has. None: no such operator.
    onnx: str | None = None
    # the rule of the ``ptflops`` convention (conventions/ptflops_ops.py) this op follows, by
    # name: "numel_out" (one per output element), "numel_in", "zero", a layer formula ("linear",
    # "conv"...), "own_flops" (its own cost's FLOPs). None: no rule (counted zero, listed as
    # unsupported), except a gradient op (``backward``), which counts its own MACs.
    ptflops: str | None = None


_REGISTRY: dict[str, type] = {}


def registrar(table: dict, what: str, role: str, key: Callable[[str], str] = str):
    """The decorator maker every name-keyed table of functions uses (converters, emitters):
    ``@register("A", "B")`` stores the function under ``key(name)`` of each name and refuses a
    name that already has one, naming both.

    >>> table = {}
    >>> converter = registrar(table, "ONNX op", "a converter")
    >>> @converter("Relu")
    ... def relu(ctx): ...
    >>> list(table)
    ['Relu']
    """

    def register(*names: str):
        def decorate(fn):
            for name in names:
                k = key(name)
                if k in table:
                    raise ValueError(f"{what} {k!r} already has {role} ({table[k].__module__}.{table[k].__name__})")
                table[k] = fn
            return fn

        return decorate

    return register


def register_op(name: str, **properties):
    """Class decorator: check the op has its four rules and add it to the registry, with
    ``properties`` (of ``Op``) set on it: ``@register_op("relu", onnx="Relu", ptflops="numel_out")``."""
    unknown = sorted(set(properties) - set(vars(Op)))
    if unknown:
        raise TypeError(f"op {name!r}: {unknown} are not op properties (registry.Op lists them)")

    def decorate(cls):
        for key, value in properties.items():
            setattr(cls, key, value)
        if name in _REGISTRY:
            raise ValueError(f"op {name!r} is already registered (by {_REGISTRY[name].__qualname__})")
        missing = [rule for rule in RULES if not hasattr(cls, rule)]
        if missing:
            raise TypeError(f"op {name!r} ({cls.__qualname__}) lacks rule(s) {missing}; "
                            f"define them, or set one to None on purpose with a comment")
        absent = [rule for rule in REQUIRED_RULES if getattr(cls, rule) is None]
        if absent:
            raise TypeError(f"op {name!r} ({cls.__qualname__}) sets {absent} to None; an op always has a "
                            f"shape rule and a cost rule (a view's cost is registry.no_cost)")
        if cls.forward is None and "cpu" not in cls.kernels:
            raise TypeError(f"op {name!r} has no forward kernel")
        for rule in RULES:
            fn = cls.__dict__.get(rule)
            if isinstance(fn, staticmethod):
                setattr(cls, rule, fn.__func__)
        cls.name = name
        cls._kernel_by_device = {"cpu": cls.forward, "cuda": cls.forward, **cls.kernels}
        _REGISTRY[name] = cls
        return cls

    return decorate


def get_op(name: str):
    """The op class registered under ``name`` (KeyError naming it when absent)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no op named {name!r} is registered") from None


def registered_ops() -> dict[str, type]:
    """A copy of the registry: op name -> op class."""
    return dict(_REGISTRY)
