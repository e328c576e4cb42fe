"""Elementwise ONNX ops: arithmetic, comparisons, logic, unary math, activations, Where, Cast,
Clip and the variadic Min/Max/Sum/Mean (one n-ary op each). Each maps to the runtime op of the
same arithmetic,
so the counters see ``add``, ``relu``, ``gelu``... exactly as for a model written in PyTorch.
"""

from __future__ import annotations

import ml_dtypes

from ... import dtypes as _dt
from ...dispatch import apply
from ...ops import activations as act
from ...ops import bitwise
from ...ops import elementwise as ew
from ...ops import nary
from ...ops import trigonometric as trig
from ..elem_types import to_dtype
from ._base import constant, converter, is_const
from .quantized import NARROW_FLOATS, to_e8m0

# binary ops whose arguments are the runtime function's, in order: arithmetic, comparisons, logic
_BINARY = {"Add": ew.add, "Sub": ew.sub, "Mul": ew.mul,
           "Equal": ew.eq, "Less": ew.lt, "LessOrEqual": ew.le, "Greater": ew.gt,
           "GreaterOrEqual": ew.ge, "And": ew.logical_and, "Or": ew.logical_or, "Xor": ew.logical_xor,
           "BitwiseAnd": bitwise.bitwise_and, "BitwiseOr": bitwise.bitwise_or, "BitwiseXor": bitwise.bitwise_xor}
_UNARY = {"Neg": ew.neg, "Abs": ew.abs, "Sign": ew.sign, "Exp": ew.exp, "Log": ew.log, "Sqrt": ew.sqrt,
          "Reciprocal": ew.reciprocal, "Sin": ew.sin, "Cos": ew.cos, "Tanh": ew.tanh, "Erf": ew.erf,
          "Floor": ew.floor, "Ceil": ew.ceil, "Round": ew.round, "Not": ew.logical_not, "IsNaN": ew.isnan,
          "Relu": act.relu, "Sigmoid": act.sigmoid, "Softsign": act.softsign, "HardSwish": act.hardswish,
          "Mish": act.mish, "Softplus": act.softplus, "Tan": trig.tan, "Asin": trig.asin, "Acos": trig.acos,
          "Atan": trig.atan, "Sinh": trig.sinh, "Cosh": trig.cosh, "Asinh": trig.asinh, "Acosh": trig.acosh,
          "Atanh": trig.atanh, "BitwiseNot": bitwise.bitwise_not}


@converter(*_BINARY)
def binary(ctx, a, b):
    return _BINARY[ctx.op_type](a, b)


@converter(*_UNARY)
def unary(ctx, x):
    return _UNARY[ctx.op_type](x)


@converter("BitShift")
def bit_shift(ctx, x, y):
    return bitwise.bitshift(x, y, ctx.attr("direction").lower())


def _trunc_div(a, b):
    """Integer division rounding toward zero, as ONNX (and C) divide integers."""
    q = ew.floor_divide(a, b)
    inexact = ew.ne(ew.remainder(a, b), 0)
    negative = ew.logical_xor(ew.lt(a, 0), ew.lt(b, 0))
    return ew.where(ew.logical_and(inexact, negative), ew.add(q, 1), q)


@converter("Div")
def div(ctx, a, b):
    if not a.dtype.is_floating_point and not b.dtype.is_floating_point:
        return _trunc_div(a, b)
    return ew.div(a, b)


@converter("Pow")
def pow_(ctx, x, y):
    out = ew.pow(x, y)
    return ew.cast(out, x.dtype)  # ONNX: the result has the base's type


@converter("Mod")
def mod(ctx, a, b):
    if not ctx.attr("fmod", 0):
        return ew.remainder(a, b)  # the sign of the divisor, as Python's %
    # C fmod: the sign of the dividend, a - b·trunc(a / b)
    if a.dtype.is_floating_point:
        q = ew.div(a, b)
        q = ew.where(ew.lt(q, 0), ew.ceil(q), ew.floor(q))
    else:
        q = _trunc_div(a, b)
    return ew.sub(a, ew.mul(b, q))


@converter("Where")
def where(ctx, condition, a, b):
    return ew.where(condition, a, b)


def _cast(ctx, x, dtype):
    """Cast-19's rule: a float8 target saturates by default (values beyond its range, infinities
    included, become its largest finite value); with ``saturate=0`` they become inf or NaN, as a
    plain conversion gives."""
    if dtype is _dt.float8_e8m0fnu and x.dtype is not dtype:
        # a power of two, rounded as round_mode says (Cast-24)
        return to_e8m0(x, bool(ctx.attr("saturate", 1)), ctx.attr("round_mode", "up") or "up")
    if dtype in NARROW_FLOATS and ctx.attr("saturate", 1) and x.dtype.is_floating_point \
            and x.dtype not in NARROW_FLOATS:
        limit = float(ml_dtypes.finfo(dtype.np).max)
        x = ew.clamp(x, -limit, limit)
    return ew.cast(x, dtype)


@converter("Cast")
def cast(ctx, x):
    return _cast(ctx, x, to_dtype(ctx.attr("to"), f"{ctx.where}: attribute 'to'"))


@converter("CastLike")
def cast_like(ctx, x, like):
    return _cast(ctx, x, like.dtype)


@converter("IsInf")
def isinf(ctx, x):
    out = ew.isinf(x)
    negative, positive = ctx.attr("detect_negative", 1), ctx.attr("detect_positive", 1)
    if negative and positive:
        return out
    if positive:
        return ew.logical_and(out, ew.gt(x, 0))
    if negative:
        return ew.logical_and(out, ew.lt(x, 0))
    return ew.logical_and(out, constant(False, _dt.bool_))


def _bound(ctx, t, what: str):
    """A Clip bound: a Python number when it is known (one ``clamp`` op), else the tensor."""
    return ctx.scalar(t, what) if is_const(t) else t


@converter("Clip")
def clip(ctx, x, low=None, high=None):
    if ctx.opset < 11:  # bounds were attributes before opset 11
        low, high = ctx.attr("min"), ctx.attr("max")
    else:
        low, high = _bound(ctx, low, "input 'min'"), _bound(ctx, high, "input 'max'")
    if low is None and high is None:
        return x
    return ew.clamp(x, low, high)


@converter("Max", "Min", "Sum", "Mean")
def variadic(ctx, *xs):
    if len(xs) == 1:  # of one input: the input itself
        return xs[0]
    # one n-ary op, not a chain of binary ones: a Sum of 100,000 inputs is one node and one row
    return {"Max": nary.maximum_n, "Min": nary.minimum_n, "Sum": nary.add_n, "Mean": nary.mean_n}[ctx.op_type](*xs)


# --- activations with attributes ---------------------------------------------------------------

# op type -> (the runtime function, called with x and the node's alpha; alpha's default)
_WITH_ALPHA = {"LeakyRelu": (act.leaky_relu, 0.01), "Elu": (act.elu, 1.0), "Celu": (act.celu, 1.0)}


@converter(*_WITH_ALPHA)
def with_alpha(ctx, x):
    fn, default = _WITH_ALPHA[ctx.op_type]
    return fn(x, ctx.attr("alpha", default))


@converter("Selu")
def selu(ctx, x):
    # ONNX's constants are float32 roundings of SELU's; the node's own values are used
    return apply(act.Elu, x, alpha=float(ctx.attr("alpha", act.SELU_ALPHA)),
                 scale=float(ctx.attr("gamma", act.SELU_SCALE)), input_scale=1.0)


@converter("HardSigmoid")
def hard_sigmoid(ctx, x):
    alpha, beta = ctx.attr("alpha", 0.2), ctx.attr("beta", 0.5)
    if abs(alpha - 1 / 6) < 1e-7 and beta == 0.5:  # PyTorch's Hardsigmoid: relu6(x + 3) / 6
        return act.hardsigmoid(x)
    return ew.clamp(ew.add(ew.mul(x, alpha), beta), 0.0, 1.0)


@converter("ThresholdedRelu")
def thresholded_relu(ctx, x):
    return ew.where(ew.gt(x, ctx.attr("alpha", 1.0)), x, 0.0)


@converter("Shrink")
def shrink(ctx, x):
    lambd, bias = ctx.attr("lambd", 0.5), ctx.attr("bias", 0.0)
    inner = ew.where(ew.gt(x, lambd), ew.sub(x, bias), 0.0)
    return ew.where(ew.lt(x, -lambd), ew.add(x, bias), inner)


@converter("Swish")
def swish(ctx, x):
    alpha = float(ctx.attr("alpha", 1.0))
    if alpha == 1.0:
        return act.silu(x)
    return ew.mul(x, act.sigmoid(ew.mul(x, alpha)))


@converter("SwiGLU")
def swiglu(ctx, a, b):
    """swish(a)·b, swish(a) = a·sigmoid(alpha·a)."""
    return ew.mul(swish(ctx, a), b)


@converter("BitCast")
def bit_cast(ctx, x):
    return bitwise.bitcast(x, to_dtype(ctx.attr("to"), f"{ctx.where}: attribute 'to'"))


@converter("Det")
def det(ctx, x):
    from ...ops.determinant import det as determinant

    return determinant(x)


@converter("Gelu")
def gelu(ctx, x):
    return act.gelu(x, ctx.attr("approximate", "none"))


@converter("PRelu")
def prelu(ctx, x, slope):
    from ...ops.movement import reshape

    # one slope, or one per channel (dim 1): the runtime's prelu op; other layouts broadcast
    shape = tuple(slope.shape)
    channels = x.shape[1] if x.ndim >= 2 else None
    squeezed = tuple(n for n in shape if n != 1)
    if slope.numel() == 1:
        return act.prelu(x, reshape(slope, (1,)))
    lead = len(shape) - (x.ndim - 1)  # slope dims aligned with x's dims 1..
    per_channel = (channels is not None and squeezed == (channels,) and lead >= 0
                   and shape[lead] == channels and all(n == 1 for n in shape[lead + 1:]))
    if per_channel:
        return act.prelu(x, reshape(slope, (channels,)))
    return ew.where(ew.gt(x, 0), x, ew.mul(x, slope))
