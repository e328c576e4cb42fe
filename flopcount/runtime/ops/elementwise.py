"""Elementwise ops: binary arithmetic, comparisons, logic, where, clamp, cast and unary math.

Cost (COUNTING.md): one FLOP per output element for each binary op, comparison and ``where``;
unary math is ``flops_per_element`` FLOPs per element (1 for exp, log, sqrt, tanh, erf...).
"""

from __future__ import annotations

__all__ = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "floor_divide", "remainder", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "where", "masked_fill", "clamp", "cast", "neg", "abs", "sign", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "erf", "floor", "ceil", "round", "logical_not", "isnan", "isinf"]  # the functional API (nn.functional re-exports it)

import sys

import numpy as np

from .. import dtypes as _dt
from ..cuda import kernels as cuda_kernels
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op
from ..sbp import pointwise, unary
from ._erf import erf as _erf_kernel
from ._helpers import as_tensor, broadcast_shapes, float_dtype, operands, same_spec


# --- binary ------------------------------------------------------------------------------------

class _Binary(Op):
    """Rules shared by binary elementwise ops. Shape: the operands broadcast, their dtypes
    promoted (``result_dtype(promoted)`` when an op sets one), errors naming the op. Cost: 1
    FLOP per output element. SBP: split along any output dim (the operands broadcast there stay
    B); the linear ops say which operands may be partial sums (``partial``)."""

    partial: tuple = ()
    result_dtype = None
    ptflops = "numel_out"  # elementwise arithmetic: one per output element

    @classmethod
    def shape(cls, a, b):
        dtype = _dt.promote(a.dtype, b.dtype)
        return Spec(broadcast_shapes(cls.name, a.shape, b.shape),
                    cls.result_dtype(dtype) if cls.result_dtype else dtype, a.device)

    def cost(out, a, b):
        return io_cost(out, (a, b), flops=numel(out))

    @classmethod
    def sbp(cls, out, a, b):
        return pointwise((a, b), out.shape, partial=cls.partial)


@register_op("add", onnx="Add")
class Add(_Binary):
    partial = ((True, True),)  # a sum of partial sums is a partial sum

    def forward(xp, a, b):
        return a + b

    def vjp(g, out, a, b):
        return g, g


@register_op("sub", onnx="Sub")
class Sub(_Binary):
    partial = ((True, True),)

    def forward(xp, a, b):
        return a - b

    def vjp(g, out, a, b):
        return g, (neg(g) if b.requires_grad else None)


@register_op("mul", onnx="Mul")
class Mul(_Binary):
    partial = ((True, False), (False, True))  # linear in either operand

    def forward(xp, a, b):
        return a * b

    def vjp(g, out, a, b):
        return (mul(g, b) if a.requires_grad else None), (mul(g, a) if b.requires_grad else None)


@register_op("div", onnx="Div")
class Div(_Binary):
    result_dtype = staticmethod(float_dtype)  # true division: integers give float32
    partial = ((True, False),)  # linear in the numerator only

    def forward(xp, a, b):
        return a / b

    def vjp(g, out, a, b):
        ga = div(g, b) if a.requires_grad else None
        gb = neg(div(mul(g, out), b)) if b.requires_grad else None
        return ga, gb


@register_op("pow")
class Pow(_Binary):

    def forward(xp, a, b):
        exponent = _small_exponent(a, b)
        if exponent == 2:
            return a * a
        if exponent == 3:
            return a * a * a
        return a ** b

    def vjp(g, out, a, b):
        ga = mul(g, mul(b, pow(a, sub(b, 1)))) if a.requires_grad else None
        gb = mul(g, mul(out, log(a))) if b.requires_grad else None
        return ga, gb


def _small_exponent(a, b) -> float | None:
    """2 or 3 when ``b`` is that one number held on the host and the result keeps ``a``'s dtype.

    The ``x ** 3`` of tanh-GELU is most of GPT-2's elementwise time through numpy's general
    ``power`` (orders of magnitude slower than ``x * x * x``); PyTorch's CPU kernel multiplies for these
    exponents too. A device array's value is not read: that would wait for the device.
    """
    if not isinstance(b, (int, float, np.ndarray, np.generic)) or np.size(b) != 1:
        return None
    if not isinstance(a, np.ndarray) or np.result_type(a, b) != a.dtype:
        return None
    value = float(np.asarray(b).reshape(()))
    return value if value in (2.0, 3.0) else None


@register_op("maximum", onnx="Max")
class Maximum(_Binary):

    def forward(xp, a, b):
        return xp.maximum(a, b)

    def vjp(g, out, a, b):
        return _select_grads(g, a, b, gt(a, b), eq(a, b))


@register_op("minimum", onnx="Min")
class Minimum(_Binary):

    def forward(xp, a, b):
        return xp.minimum(a, b)

    def vjp(g, out, a, b):
        return _select_grads(g, a, b, lt(a, b), eq(a, b))


def _select_grads(g, a, b, a_wins, tie):
    # As PyTorch: the winner takes the gradient, a tie splits it in halves.
    half = mul(g, 0.5)
    ga = where(a_wins, g, where(tie, half, 0.0)) if a.requires_grad else None
    gb = where(a_wins, 0.0, where(tie, half, g)) if b.requires_grad else None
    return ga, gb


@register_op("floor_divide")
class FloorDivide(_Binary):
    vjp = None  # piecewise constant: its gradient is zero almost everywhere

    def forward(xp, a, b):
        return xp.floor_divide(a, b)


@register_op("remainder")
class Remainder(_Binary):

    def forward(xp, a, b):
        return xp.remainder(a, b)

    def vjp(g, out, a, b):
        gb = neg(mul(g, floor_divide(a, b))) if b.requires_grad else None
        return g, gb


def _make_compare(name, np_fn, onnx=None):
    @register_op(name, onnx=onnx, ptflops="zero")  # ptflops' tables have no comparisons
    class Compare(_Binary):
        result_dtype = staticmethod(lambda dtype: _dt.bool_)
        vjp = None  # boolean output: nothing to differentiate

        def forward(xp, a, b):
            return getattr(xp, np_fn)(a, b)

    Compare.__name__ = Compare.__qualname__ = name.title().replace("_", "")
    return Compare


Eq = _make_compare("eq", "equal", "Equal")
Ne = _make_compare("ne", "not_equal")
Lt = _make_compare("lt", "less", "Less")
Le = _make_compare("le", "less_equal", "LessOrEqual")
Gt = _make_compare("gt", "greater", "Greater")
Ge = _make_compare("ge", "greater_equal", "GreaterOrEqual")
LogicalAnd = _make_compare("logical_and", "logical_and")
LogicalOr = _make_compare("logical_or", "logical_or")
LogicalXor = _make_compare("logical_xor", "logical_xor")


def _named(obj, name: str, module: str):
    """``obj`` (a function or class made by a factory) under the name its module binds it to."""
    obj.__name__ = obj.__qualname__ = name
    obj.__module__ = module
    return obj


def _binary_fn(op, doc=None):
    """The function ``fn(a, b)`` of binary op ``op``: python numbers become tensors (``operands``)."""

    def fn(input, other):
        return apply(op, *operands(op.name, input, other))

    fn.__doc__ = doc
    return _named(fn, op.name, __name__)


add = _binary_fn(Add, "``a + b`` with broadcasting.")
sub = _binary_fn(Sub)
mul = _binary_fn(Mul)


def div(input, other, rounding_mode=None):
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode == "trunc":
        q = div(input, other)
        return where(lt(q, 0), ceil(q), floor(q))
    return apply(Div, *operands("div", input, other))


pow = _binary_fn(Pow)
maximum = _binary_fn(Maximum)
minimum = _binary_fn(Minimum)
floor_divide = _binary_fn(FloorDivide)
remainder = _binary_fn(Remainder)
eq, ne, lt, le, gt, ge = map(_binary_fn, (Eq, Ne, Lt, Le, Gt, Ge))
logical_and, logical_or, logical_xor = map(_binary_fn, (LogicalAnd, LogicalOr, LogicalXor))


# --- where, clamp, cast ------------------------------------------------------------------------

@register_op("where", ptflops="zero")
class Where(Op):
    computes = False  # moves or selects elements: runs on any dtype's storage
    def shape(cond, a, b):
        if cond.dtype is not _dt.bool_:
            raise ShapeError(f"where: condition must be bool, got {cond.dtype.name}")
        s = broadcast_shapes("where", broadcast_shapes("where", cond.shape, a.shape), b.shape)
        return Spec(s, _dt.promote(a.dtype, b.dtype), a.device)

    def forward(xp, cond, a, b):
        return select(xp, cond, a, b)

    def vjp(g, out, cond, a, b):
        ga = where(cond, g, 0.0) if a.requires_grad else None
        gb = where(cond, 0.0, g) if b.requires_grad else None
        return None, ga, gb

    def cost(out, cond, a, b):
        return io_cost(out, (cond, a, b), flops=numel(out))  # one select per element

    def sbp(out, cond, a, b):
        # selecting between two partial sums elementwise is a partial sum
        return pointwise((cond, a, b), out.shape, partial=((False, True, True),))


_UINT = {4: "uint32", 8: "uint64"}


def select(xp, cond, a, b):
    """``xp.where(cond, a, b)`` on arrays, without a branch per element on the CPU.

    numpy's ``where`` branches on every condition value; on a mask such as ReLU's (about half
    True, in no order) mispredictions make it several times slower than an arithmetic pass. Operands of one
    4- or 8-byte dtype are selected through their bits instead, ``b ^ ((a ^ b) & -cond)``,
    which is exact for every value, NaN and infinities included. Other dtypes, and other array
    modules (a GPU has no branch to mispredict), use ``where``.
    """
    uint = _UINT.get(a.dtype.itemsize)
    if xp is not np or uint is None or a.dtype != b.dtype or a.dtype.kind not in "fiu":
        return xp.where(cond, a, b)
    bits = np.empty(np.broadcast_shapes(cond.shape, a.shape, b.shape), dtype=uint)
    np.subtract(0, cond, out=bits, dtype=uint)  # the mask: True -> all ones, False -> 0
    a_bits, b_bits = a.view(uint), b.view(uint)
    if b.size == 1 and not b_bits.any():  # b is +0: the bits of a where cond, else 0
        bits &= a_bits
    else:
        bits &= a_bits ^ b_bits
        bits ^= b_bits
    return bits.view(a.dtype)


def where(condition, a, b):
    """Elements of ``a`` where ``condition`` holds, else of ``b`` (either may be a scalar)."""
    from ..tensor import Tensor

    like = a if isinstance(a, Tensor) else (b if isinstance(b, Tensor) else condition)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor) and like.dtype is _dt.bool_:
        dtype = _dt.scalar_dtype(a, _dt.bool_)
        dtype = _dt.promote(dtype, _dt.scalar_dtype(b, _dt.bool_))
        a, b = as_tensor(a, like, dtype), as_tensor(b, like, dtype)
    else:
        a, b = operands("where", a, b) if not (isinstance(a, Tensor) and isinstance(b, Tensor)) else (a, b)
    return apply(Where, condition, a, b)


def masked_fill(x, mask, value):
    """``x`` with ``value`` written where ``mask`` is True (a ``where``)."""
    return where(mask, as_tensor(value, x), x)


@register_op("clamp", ptflops="numel_out")
class Clamp(Op):
    def shape(x, *, min=None, max=None):
        return same_spec(x)

    def forward(xp, x, *, min=None, max=None):
        return xp.clip(x, min, max)

    def vjp(g, out, x, *, min=None, max=None):
        inside = None
        if min is not None:
            inside = ge(x, min)
        if max is not None:
            upper = le(x, max)
            inside = upper if inside is None else logical_and(inside, upper)
        return where(inside, g, 0.0) if inside is not None else g

    def cost(out, x, *, min=None, max=None):
        return io_cost(out, (x,), flops=numel(out))  # one compare-select per element

    def sbp(out, x, *, min=None, max=None):
        return unary(x)


def clamp(x, min=None, max=None):
    """Limit ``x`` to [min, max]; tensor bounds use ``maximum``/``minimum``."""
    from ..tensor import Tensor

    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = x if min is None else maximum(x, min)
        return out if max is None else minimum(out, max)
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    return apply(Clamp, x, min=min, max=max)


@register_op("cast", ptflops="zero")
class Cast(Op):
    computes = False  # moves or selects elements: runs on any dtype's storage
    def shape(x, *, dtype):
        return Spec(x.shape, _dt.get_dtype(dtype), x.device)

    def forward(xp, x, *, dtype):
        return x.astype(_dt.get_dtype(dtype).np)

    def vjp(g, out, x, *, dtype):
        return cast(g, x.dtype) if x.dtype.is_floating_point else None

    def cost(out, x, *, dtype):
        return io_cost(out, (x,))  # a conversion moves bytes and does no arithmetic

    def sbp(out, x, *, dtype):
        # a partial sum converted between floating types is still one (up to rounding)
        return unary(x, linear=x.dtype.is_floating_point and _dt.get_dtype(dtype).is_floating_point)


def cast(x, dtype):
    """``x`` converted to ``dtype`` (``x.to(dtype)``)."""
    dtype = _dt.get_dtype(dtype)
    if dtype is x.dtype:
        return x
    return apply(Cast, x, dtype=dtype.name)


# --- unary -------------------------------------------------------------------------------------

def _unary(name, forward, vjp, doc=None, *, float_only=False, bool_out=False, linear=False, cuda_kernel=False,
           onnx=None, ptflops="numel_out"):
    """Register unary op ``name`` from its kernel ``forward(xp, x)`` and gradient ``vjp(g, out, x)``
    (None on purpose for a piecewise-constant or boolean result), with the rules every unary op
    shares: same shape (float for ``float_only``, bool for ``bool_out``), 1 FLOP per element, SBP
    split along any dim (partial sums pass through ``linear`` ops). ``cuda_kernel``: ``forward``
    also runs as a generated CUDA kernel; ``onnx``, ``ptflops``: as on ``Op``. Returns the class and ``fn(x)``."""

    class Unary(Op):
        flops_per_element = 1
        kernels = {"cuda": cuda_kernels.activation(name)(forward)} if cuda_kernel else {}

        def shape(x):
            dtype = _dt.bool_ if bool_out else (float_dtype(x.dtype) if float_only else x.dtype)
            return Spec(x.shape, dtype, x.device)

        def cost(out, x):
            return io_cost(out, (x,), flops=numel(out))

        def sbp(out, x):
            return unary(x, linear=linear)

    # named as the caller's module binds them (as namedtuple does), so both pickle by reference
    module = sys._getframe(1).f_globals["__name__"]
    Unary.forward, Unary.vjp = forward, vjp
    register_op(name, onnx=onnx, ptflops=ptflops)(_named(Unary, "".join(p.title() for p in name.split("_")), module))

    def fn(x):
        return apply(Unary, x)

    fn.__doc__ = doc or f"Elementwise {name}."
    return Unary, _named(fn, name, module)


Neg, neg = _unary("neg", lambda xp, x: -x, lambda g, out, x: neg(g), linear=True, onnx="Neg")
Abs, abs = _unary("abs", lambda xp, x: xp.abs(x), lambda g, out, x: mul(g, sign(x)), onnx="Abs")
Sign, sign = _unary("sign", lambda xp, x: xp.sign(x), None, onnx="Sign")  # piecewise constant
Exp, exp = _unary("exp", lambda xp, x: xp.exp(x), lambda g, out, x: mul(g, out), float_only=True, onnx="Exp")
Log, log = _unary("log", lambda xp, x: xp.log(x), lambda g, out, x: div(g, x), float_only=True, onnx="Log")
Sqrt, sqrt = _unary("sqrt", lambda xp, x: xp.sqrt(x), lambda g, out, x: div(mul(g, 0.5), out), float_only=True,
                    onnx="Sqrt")
# rsqrt = 1 / sqrt(x): counted as 1 FLOP, as hardware has a reciprocal-square-root instruction.
Rsqrt, rsqrt = _unary("rsqrt", lambda xp, x: 1.0 / xp.sqrt(x),
                      lambda g, out, x: mul(g, mul(-0.5, mul(out, mul(out, out)))), float_only=True, cuda_kernel=True)
Reciprocal, reciprocal = _unary("reciprocal", lambda xp, x: 1.0 / x, lambda g, out, x: neg(mul(g, mul(out, out))),
                                float_only=True, onnx="Reciprocal")
Sin, sin = _unary("sin", lambda xp, x: xp.sin(x), lambda g, out, x: mul(g, cos(x)), float_only=True, onnx="Sin")
Cos, cos = _unary("cos", lambda xp, x: xp.cos(x), lambda g, out, x: neg(mul(g, sin(x))), float_only=True, onnx="Cos")
Tanh, tanh = _unary("tanh", lambda xp, x: xp.tanh(x), lambda g, out, x: mul(g, sub(1.0, mul(out, out))),
                    float_only=True, onnx="Tanh")
# d/dx erf(x) = 2/sqrt(pi) * exp(-x^2)
Erf, erf = _unary("erf", _erf_kernel, lambda g, out, x: mul(g, mul(1.1283791670955126, exp(neg(mul(x, x))))),
                  float_only=True, cuda_kernel=True, onnx="Erf")
Floor, floor = _unary("floor", lambda xp, x: xp.floor(x), None, onnx="Floor")  # piecewise constant
Ceil, ceil = _unary("ceil", lambda xp, x: xp.ceil(x), None, onnx="Ceil")  # piecewise constant
Round, round = _unary("round", lambda xp, x: xp.round(x), None, onnx="Round")  # piecewise constant
# boolean results: ptflops' tables count no arithmetic for them
LogicalNot, logical_not = _unary("logical_not", lambda xp, x: xp.logical_not(x), None, bool_out=True, ptflops="zero")
IsNan, isnan = _unary("isnan", lambda xp, x: xp.isnan(x), None, bool_out=True, onnx="IsNaN", ptflops="zero")
IsInf, isinf = _unary("isinf", lambda xp, x: xp.isinf(x), None, bool_out=True, onnx="IsInf", ptflops="zero")
