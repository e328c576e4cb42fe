"""Arithmetic primitives: elementwise math and comparisons, ``dot_general`` (a ``matmul`` when
its dimension numbers are a plain or batched matrix product, an ``einsum`` otherwise) and the
reductions (``reduce_sum``/``max``/``min``, ``argmax``/``argmin``)."""

from __future__ import annotations

import string

import numpy as np

from ...ops import activations as act
from ...ops import elementwise as ew
from ...ops import bitwise, linalg, movement, reduction
from ...ops import trigonometric as trig
from ...ops.elementwise import cast
from ._base import constant, converter, dtype_of

_BINARY = {
    "add": ew.add, "sub": ew.sub, "mul": ew.mul, "max": ew.maximum, "min": ew.minimum,
    "pow": ew.pow,
    "eq": ew.eq, "ne": ew.ne, "lt": ew.lt, "le": ew.le, "gt": ew.gt, "ge": ew.ge,
}
_UNARY = {
    **{name: getattr(ew, name) for name in ("neg", "exp", "log", "tanh", "rsqrt", "sqrt", "erf", "abs", "sign",
                                            "floor", "ceil", "sin", "cos")},
    "logistic": act.sigmoid,
    **{name: getattr(trig, name) for name in trig.__all__},   # tan, asin, ..., atanh
}


def _binary(fn):
    return lambda ctx, a, b: fn(a, b)


def _unary(fn):
    return lambda ctx, x: fn(x)


for _name, _fn in _BINARY.items():
    converter(_name)(_binary(_fn))
for _name, _fn in _UNARY.items():
    converter(_name)(_unary(_fn))


@converter("div")
def div(ctx, a, b):
    if a.dtype.is_floating_point:
        return ew.div(a, b)
    # integer division rounds toward zero in XLA
    return cast(_trunc(ew.div(cast(a, "float64"), cast(b, "float64"))), a.dtype)


def _trunc(q):
    return q.sign().mul(q.abs().floor())


@converter("rem")
def rem(ctx, a, b):
    # XLA's remainder takes the dividend's sign (C's fmod), not the divisor's as ``remainder``
    if not a.dtype.is_floating_point:
        raise ctx.unsupported(f"integer remainder on {a.dtype.name} is not supported")
    return ew.sub(a, ew.mul(b, _trunc(ew.div(a, b))))


@converter("and", "or", "xor")
def logical(ctx, a, b):
    if a.dtype.name == "bool":
        fn = {"and": ew.logical_and, "or": ew.logical_or, "xor": ew.logical_xor}[ctx.primitive]
    else:
        fn = {"and": bitwise.bitwise_and, "or": bitwise.bitwise_or, "xor": bitwise.bitwise_xor}[ctx.primitive]
    return fn(a, b)


@converter("not")
def not_(ctx, x):
    return x.logical_not() if x.dtype.name == "bool" else bitwise.bitwise_not(x)


@converter("shift_left", "shift_right_logical", "shift_right_arithmetic")
def shift(ctx, a, b):
    unsigned = a.dtype.name.startswith("uint")
    if ctx.primitive != "shift_left" and unsigned != (ctx.primitive == "shift_right_logical"):
        # numpy shifts an unsigned integer logically and a signed one arithmetically
        raise ctx.unsupported(f"{ctx.primitive} on {a.dtype.name} is not supported")
    return bitwise.bitshift(a, b, "left" if ctx.primitive == "shift_left" else "right")


@converter("bitcast_convert_type")
def bitcast_convert_type(ctx, x):
    want = dtype_of(ctx.params["new_dtype"])
    if want.itemsize != x.dtype.itemsize:
        raise ctx.unsupported(f"a bitcast from {x.dtype.name} to {want.name} (another width) is not supported")
    return bitwise.bitcast(x, want)


@converter("integer_pow")
def integer_pow(ctx, x):
    y = int(ctx.params["y"])
    return ew.mul(x, x) if y == 2 else ew.pow(x, constant(np.array(y, x.dtype.np)))


@converter("square")
def square(ctx, x):
    return ew.mul(x, x)


@converter("exp2")
def exp2(ctx, x):
    return ew.pow(constant(np.array(2, x.dtype.np)), x)


@converter("log1p")
def log1p(ctx, x):
    return ew.add(x, constant(np.array(1, x.dtype.np))).log()


@converter("expm1")
def expm1(ctx, x):
    return ew.sub(x.exp(), constant(np.array(1, x.dtype.np)))


@converter("erfc")
def erfc(ctx, x):
    return ew.sub(constant(np.array(1, x.dtype.np)), x.erf())


@converter("round")
def round_(ctx, x):
    # numpy rounds half to even; XLA's default (method 0) rounds half away from zero
    if int(ctx.params.get("rounding_method", 0)) == 1:
        return x.round()
    return ew.mul(x.sign(), ew.add(x.abs(), constant(np.array(0.5, x.dtype.np))).floor())


@converter("clamp")
def clamp(ctx, low, x, high):
    return ew.minimum(ew.maximum(x, low), high)


@converter("stop_gradient", "copy", "copy_p", "optimization_barrier", "reduce_precision")
def identity(ctx, *xs):
    return list(xs) if len(xs) > 1 else xs[0]


# --- matrix products ---------------------------------------------------------------------------

@converter("dot_general")
def dot_general(ctx, a, b):
    (ca, cb), (ba, bb) = ctx.params["dimension_numbers"]
    ca, cb, ba, bb = map(tuple, (ca, cb, ba, bb))
    if _is_matmul(a.ndim, b.ndim, ca, cb, ba, bb):
        y = linalg.matmul(a, b)
    else:
        y = linalg.einsum(_equation(a.ndim, b.ndim, ca, cb, ba, bb), a, b)
    return y


def _is_matmul(na: int, nb: int, ca, cb, ba, bb) -> bool:
    """``a @ b`` as numpy means it: contract a's last dim with b's first (b a matrix), or with
    its next-to-last dim over leading batch dims in order."""
    if ca != (na - 1,):
        return False
    if not ba and not bb:
        return nb == 2 and cb == (0,) or nb == 1 and cb == (0,)
    batch = tuple(range(len(ba)))
    return ba == batch and bb == batch and na == nb == len(batch) + 2 and cb == (nb - 2,)


def _equation(na: int, nb: int, ca, cb, ba, bb) -> str:
    """The einsum of a dot_general: output dims are batch, then a's free, then b's free dims."""
    letters = iter(string.ascii_letters)
    sa, sb = [None] * na, [None] * nb
    for i, j in zip(ba, bb):
        sa[i] = sb[j] = next(letters)
    for i, j in zip(ca, cb):
        sa[i] = sb[j] = next(letters)
    for s in (sa, sb):
        for i, v in enumerate(s):
            if v is None:
                s[i] = next(letters)
    out = [sa[i] for i in ba] + [sa[i] for i in range(na) if i not in ca and i not in ba] \
        + [sb[j] for j in range(nb) if j not in cb and j not in bb]
    return f"{''.join(sa)},{''.join(sb)}->{''.join(out)}"


# --- reductions ------------------------------------------------------------------------------

def _axes(ctx) -> tuple:
    return tuple(int(a) for a in ctx.params["axes"])


@converter("reduce_sum")
def reduce_sum(ctx, x):
    axes = _axes(ctx)
    return reduction.sum(x, dim=axes) if axes else x


@converter("reduce_max", "reduce_min")
def reduce_extreme(ctx, x):
    axes = _axes(ctx)
    if not axes:
        return x
    return (reduction.amax if ctx.primitive == "reduce_max" else reduction.amin)(x, dim=axes)


@converter("reduce_prod")
def reduce_prod(ctx, x):
    y = x
    for axis in sorted(_axes(ctx), reverse=True):
        y = reduction.prod(y, dim=axis)
    return y


@converter("argmax", "argmin")
def arg_extreme(ctx, x):
    (axis,) = _axes(ctx)
    fn = reduction.argmax if ctx.primitive == "argmax" else reduction.argmin
    return cast(fn(x, dim=axis), ctx.out_dtype)


@converter("cumsum")
def cumsum(ctx, x):
    axis = int(ctx.params["axis"])
    if ctx.params.get("reverse"):
        return movement.flip(reduction.cumsum(movement.flip(x, (axis,)), dim=axis), (axis,))
    return reduction.cumsum(x, dim=axis)


@converter("is_finite")
def is_finite(ctx, x):
    return ew.logical_or(x.isinf(), x.isnan()).logical_not()
