"""Elementwise ATen ops and activations: arithmetic, comparisons, logic, unary math, casts,
``where``/``masked_fill``, and the activation functions. Each maps onto the runtime op of the
same meaning, so it is counted by that op's rule (COUNTING.md)."""

from __future__ import annotations

from ...nn import functional as F
from ...ops import activations as act
from ...ops import complex_arith
from ...ops import elementwise as ew
from ...tensor import Tensor
from ._base import converter, same_arguments


# --- arithmetic --------------------------------------------------------------------------------

def _scaled(value, alpha):
    return value if alpha == 1 else ew.mul(value, alpha)


@converter("add")
def add(ctx, self, other, alpha=1):
    return ew.add(self, _scaled(other, alpha))


@converter("sub")
def sub(ctx, self, other, alpha=1):
    return ew.sub(self, _scaled(other, alpha))


@converter("rsub")
def rsub(ctx, self, other, alpha=1):
    """other - alpha * self."""
    return ew.sub(other, _scaled(self, alpha)) if isinstance(other, Tensor) else ew.sub(
        _as_like(other, self), _scaled(self, alpha))


def _as_like(value, like: Tensor):
    from ...ops._helpers import as_tensor

    return as_tensor(value, like)


@converter("div")
def div(ctx, self, other, rounding_mode=None):
    return _as_recorded(ctx, ew.div(self, other, rounding_mode=rounding_mode))


def _as_recorded(ctx, value):
    """A rounded quotient of integers in the integer dtype torch gives it (the runtime's
    rounding divisions compute in floating point)."""
    want = ctx.out_spec.dtype if ctx.out_spec is not None else value.dtype
    return value if value.dtype is want else ew.cast(value, want)


@converter("flopcount.complex_mul")
def complex_mul(ctx, a, b, conjugate=False):
    """A product of complex values, which the importer holds as real (..., 2) pairs (``complex.py``)."""
    return complex_arith.complex_mul(a, b, conjugate)


@converter("pow")
def pow(ctx, self, exponent):
    if not isinstance(self, Tensor):   # pow.Scalar: a number to a tensor power
        self = _as_like(self, exponent)
    return ew.pow(self, exponent)


@converter("square")
def square(ctx, self):
    return ew.mul(self, self)


@converter("clamp", "clip")
def clamp(ctx, self, min=None, max=None):
    if min is None and max is None:
        return self
    return ew.clamp(self, min, max)


@converter("clamp_min")
def clamp_min(ctx, self, min):
    return ew.clamp(self, min, None)


@converter("clamp_max")
def clamp_max(ctx, self, max):
    return ew.clamp(self, None, max)


# --- same-named binary ops, comparisons and logic ---------------------------------------------------------------------

# binary ops that are the runtime's function of the same name
same_arguments({name: getattr(ew, name) for name in ("mul", "floor_divide", "remainder", "maximum", "minimum",
                                                     "eq", "ne", "lt", "le", "gt", "ge")})


def _logical(fn, what: str):
    def convert(ctx, self, other):
        if not (self.dtype.name == "bool" and (not isinstance(other, Tensor) or other.dtype.name == "bool")):
            raise ctx.unsupported(f"{what} of {self.dtype.name} tensors (only bool tensors are supported)")
        return fn(self, other)

    return convert


converter("logical_and", "bitwise_and", "__and__")(_logical(ew.logical_and, "bitwise and"))
converter("logical_or", "bitwise_or", "__or__")(_logical(ew.logical_or, "bitwise or"))
converter("logical_xor", "bitwise_xor", "__xor__")(_logical(ew.logical_xor, "bitwise xor"))


@converter("logical_not", "bitwise_not")
def logical_not(ctx, self):
    if ctx.op.startswith("aten.bitwise_not") and self.dtype.name != "bool":
        raise ctx.unsupported(f"bitwise not of {self.dtype.name} tensors (only bool tensors are supported)")
    return ew.logical_not(self)


@converter("where")
def where(ctx, condition, self=None, other=None):
    if self is None:
        raise ctx.unsupported("where(condition) without values (a data-dependent shape)")
    return ew.where(condition, self, other)


@converter("masked_fill")
def masked_fill(ctx, self, mask, value):
    return ew.where(mask, value if isinstance(value, Tensor) else _as_like(value, self), self)


# --- unary math ----------------------------------------------------------------------------------

_UNARY = {"neg": ew.neg, "abs": ew.abs, "exp": ew.exp, "log": ew.log, "sqrt": ew.sqrt, "rsqrt": ew.rsqrt,
          "sin": ew.sin, "cos": ew.cos, "tanh": ew.tanh, "erf": ew.erf, "reciprocal": ew.reciprocal,
          "floor": ew.floor, "ceil": ew.ceil, "sign": ew.sign, "isnan": ew.isnan, "isinf": ew.isinf,
          "sigmoid": act.sigmoid, "relu": act.relu, "silu": act.silu, "mish": act.mish,
          "hardsigmoid": act.hardsigmoid, "hardswish": act.hardswish, "relu6": act.relu6,
          "log_sigmoid": act.logsigmoid}
same_arguments(_UNARY)


@converter("round")
def round_(ctx, self, decimals=0):
    if decimals:
        raise ctx.unsupported(f"round with decimals={decimals}")
    return ew.round(self)


# --- casts ----------------------------------------------------------------------------------------

@converter("_to_copy")
def to_copy(ctx, self, dtype=None, **kwargs):
    """``x.to(dtype)`` (device and layout moves are no-ops in a graph: it runs where it is put)."""
    return self if dtype is None else ew.cast(self, dtype)


@converter("type_as")
def type_as(ctx, self, other):
    return ew.cast(self, other.dtype)


# --- activations ----------------------------------------------------------------------------------

same_arguments({"gelu": act.gelu, "hardtanh": act.hardtanh, "leaky_relu": act.leaky_relu, "celu": act.celu,
                "selu": act.selu, "softplus": act.softplus, "glu": act.glu})


@converter("elu")
def elu(ctx, self, alpha=1.0, scale=1.0, input_scale=1.0):
    if scale != 1.0 or input_scale != 1.0:
        if abs(scale - 1.0507009873554805) < 1e-12 and abs(alpha - 1.6732632423543772) < 1e-12:
            return act.selu(self)
        raise ctx.unsupported(f"elu with scale={scale}, input_scale={input_scale}")
    return act.elu(self, alpha)


@converter("prelu", "_prelu_kernel")
def prelu(ctx, self, weight):
    # _prelu_kernel takes the weight already shaped to broadcast, (1, C, 1...): one per channel
    return act.prelu(self, weight if weight.ndim <= 1 else weight.reshape(weight.numel()))


@converter("softmax", "_softmax", "_safe_softmax")
def softmax(ctx, self, dim, dtype=None):
    # _softmax(self, dim, half_to_float): a bool third argument, not a dtype. _safe_softmax (what
    # scaled_dot_product_attention's math decomposes into) gives 0, not NaN, on a row masked
    # entirely; the same work otherwise, and causal masks leave no such row
    return F.softmax(self, dim=dim, dtype=dtype if hasattr(dtype, "np") else None)


@converter("log_softmax", "_log_softmax")
def log_softmax(ctx, self, dim, dtype=None):
    return F.log_softmax(self, dim=dim, dtype=dtype if hasattr(dtype, "np") else None)


@converter("log_sigmoid_forward")
def log_sigmoid_forward(ctx, self):
    """(output, buffer): the buffer is the backward's, which a forward graph does not read."""
    return act.logsigmoid(self), None


# --- compositions: ops the runtime has no single op for, written as the arithmetic they do ----

@converter("expm1")
def expm1(ctx, self):
    return ew.sub(ew.exp(self), 1.0)  # 2 FLOPs per element where torch's kernel does 1 call


@converter("log1p")
def log1p(ctx, self):
    return ew.log(ew.add(self, 1.0))


@converter("fmod")
def fmod(ctx, self, other):
    """a - b·trunc(a / b): the remainder with the sign of the dividend (C's fmod)."""
    return _as_recorded(ctx, ew.sub(self, ew.mul(other, ew.div(self, other, rounding_mode="trunc"))))
