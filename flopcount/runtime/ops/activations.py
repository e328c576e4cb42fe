"""Activations and softmax.

Cost (COUNTING.md): relu, leaky_relu, hardtanh (so relu6) 1 FLOP per element; sigmoid 4 (neg,
exp, add, div); silu 5; gelu 5 (erf form) or 8 (tanh form); softmax and log_softmax 5 per
element (max, subtract, exp, sum, divide). Activations without a COUNTING.md row count the
arithmetic of a straightforward kernel, written next to each cost rule: prelu as leaky_relu (1);
elu 4 (exp, subtract, multiply by alpha, select) + 1 for each non-unit scale; hardsigmoid 3 (add,
clamp, divide); hardswish 4 (hardsigmoid, multiply); softplus 4 (exp, add, log, threshold select)
+ 2 when beta != 1; mish 5 (exp, add, log, tanh, multiply).

relu6, selu, celu, logsigmoid, softsign, tanhshrink, softmin and glu are composites of these
ops and the elementwise ones; their cost is the sum of their parts.
"""

from __future__ import annotations

__all__ = ["relu", "relu6", "leaky_relu", "prelu", "elu", "selu", "celu", "gelu", "silu", "mish",
           "hardswish", "hardsigmoid", "hardtanh", "softplus", "logsigmoid", "softsign", "tanhshrink",
           "glu", "sigmoid", "softmax", "softmin", "log_softmax"]  # the functional API (nn.functional re-exports it)

import math

import numpy as np

from .. import cpu_kernels
from ..cuda import kernels as cuda_kernels
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, io_cost, numel, register_op
from ..sbp import B, S, Signature, unary
from ._erf import compiled_kernels as _compiled
from ._erf import gelu_erf as _gelu_erf_kernel
from ._parallel import split
from ._helpers import check_float, norm_dim, same_spec
from .elementwise import (abs as _abs, add, div, erf, exp, gt, le, logical_and, lt, mul, neg, select, sub,
                          tanh, where)
from .reduction import sum as reduce_sum

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_C = 0.044715


def _stable_sigmoid(xp, x):
    compiled = _compiled(xp, x)
    if compiled is not None:
        return compiled.unary(compiled.sigmoid_float32, x)
    # 1 / (1 + exp(-x)) overflows for very negative x in float16/32; this form does not
    e = xp.exp(-xp.abs(x))
    positive = 1 / (1 + e)
    return select(xp, x >= 0, positive, e * positive).astype(x.dtype, copy=False)


_ZERO_BLOCK = 1 << 14
_zero_blocks: dict = {}


def _max_with_zero(x, out) -> None:
    """``numpy.maximum(x, 0, out=out)`` at memory speed, NaN kept as ``maximum`` keeps it.

    numpy's ``maximum`` against a scalar takes a loop without SIMD, several times slower than
    against an array; so the scalar is a read-only block of zeros that stays in the cache, block
    by block.
    """
    zeros = _zero_blocks.get(x.dtype)
    if zeros is None:
        zeros = np.zeros(_ZERO_BLOCK, dtype=x.dtype)
        zeros.flags.writeable = False
        _zero_blocks[x.dtype] = zeros
    for start in range(0, x.size, _ZERO_BLOCK):
        stop = min(start + _ZERO_BLOCK, x.size)
        np.maximum(x[start:stop], zeros[:stop - start], out=out[start:stop])


def _softplus_kernel(xp, z):
    """log(1 + exp(z)) without overflow: max(z, 0) + log1p(exp(-|z|))."""
    return xp.maximum(z, 0) + xp.log1p(xp.exp(-xp.abs(z)))


class _Activation(Op):
    """An activation of one tensor, element by element: a floating point input and an output of
    its spec; SBP splits it along any dim (none is linear); it costs ``flops`` FLOPs per output
    element (an activation whose count depends on its attrs writes its own cost rule)."""

    flops = 1
    ptflops = "numel_out"  # ptflops' activation hooks: one per output element

    @classmethod
    def shape(cls, x, **attrs):
        check_float(cls.name, x)
        return same_spec(x)

    def sbp(out, x, **attrs):
        return unary(x)

    @classmethod
    def cost(cls, out, x, **attrs):
        return io_cost(out, (x,), flops=cls.flops * numel(out))


@register_op("relu", onnx="Relu")
class Relu(_Activation):
    def shape(x):
        return same_spec(x)

    def forward(xp, x):
        return xp.maximum(x, 0)

    def _cpu(xp, x):
        compiled = _compiled(xp, x)
        if compiled is not None:
            return compiled.unary(compiled.relu_float32, x)
        if not x.flags.c_contiguous:
            return xp.maximum(x, 0)
        out = xp.empty_like(x)
        flat, flat_out = x.reshape(-1), out.reshape(-1)
        split(flat.size, lambda a, b: _max_with_zero(flat[a:b], flat_out[a:b]))
        return out

    kernels = {"cpu": _cpu}

    def vjp(g, out, x):
        return where(gt(out, 0), g, 0.0)

    flops = 1  # one compare-select per element


@register_op("hardtanh")
class Hardtanh(_Activation):
    def forward(xp, x, *, min_val, max_val):
        return xp.clip(x, min_val, max_val)

    def vjp(g, out, x, *, min_val, max_val):
        # as PyTorch: no gradient at the bounds themselves
        return where(logical_and(gt(x, min_val), lt(x, max_val)), g, 0.0)

    flops = 1  # one clamp per element (COUNTING.md row)


@register_op("leaky_relu")
class LeakyRelu(_Activation):
    def forward(xp, x, *, negative_slope):
        return select(xp, x > 0, x, x * negative_slope)

    kernels = {"cuda": cuda_kernels.activation("leaky_relu")(forward)}

    def vjp(g, out, x, *, negative_slope):
        return where(gt(x, 0), g, mul(g, negative_slope))

    flops = 1  # one select per element (COUNTING.md row)


def _channel_view(w, x):
    """PReLU's weight (C,) shaped to broadcast along dim 1 of ``x`` (one slope: a scalar view)."""
    from .movement import reshape

    if numel(w) == 1:
        return reshape(w, ())
    return reshape(w, (1, numel(w)) + (1,) * (x.ndim - 2))


@register_op("prelu", ptflops="numel_out")
class Prelu(Op):
    """leaky_relu with learned slopes: one for all channels, or one per channel (dim 1)."""

    def shape(x, weight):
        check_float("prelu", x)
        n = numel(weight)
        if weight.ndim > 1 or (n != 1 and (x.ndim < 2 or x.shape[1] != n)):
            raise ShapeError(f"prelu: weight {weight.shape} needs 1 element or one per channel "
                             f"(dim 1) of the input {x.shape}")
        return same_spec(x)

    def forward(xp, x, weight):
        w = weight.reshape(()) if weight.size == 1 else weight.reshape((1, -1) + (1,) * (x.ndim - 2))
        return select(xp, x > 0, x, x * w)

    def vjp(g, out, x, weight):
        positive = gt(x, 0)
        gx = where(positive, g, mul(g, _channel_view(weight, x))) if x.requires_grad else None
        gw = None
        if weight.requires_grad:
            from .movement import reshape

            per_element = where(positive, 0.0, mul(g, x))
            dims = tuple(d for d in range(x.ndim) if numel(weight) == 1 or d != 1)
            gw = reshape(reduce_sum(per_element, dims), weight.shape)
        return gx, gw

    def cost(out, x, weight):
        return io_cost(out, (x, weight), flops=numel(out))  # one select per element, as leaky_relu

    def sbp(out, x, weight):
        # any dim but the channels with the slopes whole; the channels with their slopes
        sigs = [Signature((S(d), B), (S(d),)) for d in range(x.ndim) if d != 1 and x.shape[d] > 1]
        if numel(weight) == 1:
            sigs += [Signature((S(1), B), (S(1),))] if x.ndim > 1 and x.shape[1] > 1 else []
        else:
            sigs.append(Signature((S(1), S(0)), (S(1),)))
        return sigs


@register_op("elu")
class Elu(_Activation):
    """PyTorch's ELU kernel: scale·x for x > 0, else scale·alpha·(exp(input_scale·x) − 1).
    ELU is (alpha, 1, 1), SELU (SELU_ALPHA, SELU_SCALE, 1), CELU (alpha, 1, 1/alpha)."""

    def forward(xp, x, *, alpha, scale, input_scale):
        negative = alpha * xp.expm1(xp.minimum(x, 0) * input_scale)
        return scale * select(xp, x > 0, x, negative)

    kernels = {"cuda": cuda_kernels.activation("elu")(forward)}

    def vjp(g, out, x, *, alpha, scale, input_scale):
        # for x <= 0: d/dx = input_scale·scale·alpha·exp(input_scale·x) = input_scale·(out + scale·alpha)
        negative = mul(g, add(out, scale * alpha))
        if input_scale != 1:
            negative = mul(negative, input_scale)
        return where(gt(x, 0), mul(g, scale) if scale != 1 else g, negative)

    def cost(out, x, *, alpha, scale, input_scale):
        # exp, subtract 1, multiply by alpha, select; one more multiply for each non-unit scale
        per_element = 4 + (scale != 1) + (input_scale != 1)
        return io_cost(out, (x,), flops=per_element * numel(out))


@register_op("gelu")
class Gelu(_Activation):
    """x·Φ(x) with the erf form of Φ (``approximate='none'``) or the tanh approximation."""

    def shape(x, *, approximate):
        check_float("gelu", x)
        if approximate not in ("none", "tanh"):
            raise ShapeError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        return same_spec(x)

    def forward(xp, x, *, approximate):
        if approximate == "tanh":
            inner = _SQRT_2_OVER_PI * (x + _GELU_TANH_C * x * x * x)
            return 0.5 * x * (1 + xp.tanh(inner))
        return _gelu_erf_kernel(xp, x)

    kernels = {"cuda": cuda_kernels.activation("gelu")(forward)}

    def vjp(g, out, x, *, approximate):
        if approximate == "tanh":
            # t = tanh(k(x + c x³)); d/dx = ½(1 + t) + ½x(1 − t²)·k(1 + 3c x²)
            x2 = mul(x, x)
            t = tanh(mul(mul(x, add(mul(x2, _GELU_TANH_C), 1.0)), _SQRT_2_OVER_PI))
            inner_grad = mul(add(mul(x2, 3 * _GELU_TANH_C), 1.0), _SQRT_2_OVER_PI)
            grad = add(mul(add(t, 1.0), 0.5), mul(mul(mul(x, 0.5), sub(1.0, mul(t, t))), inner_grad))
            return mul(g, grad)
        # d/dx x·Φ(x) = Φ(x) + x·φ(x)
        cdf = mul(add(erf(mul(x, 1 / math.sqrt(2))), 1.0), 0.5)
        pdf = mul(exp(mul(mul(x, x), -0.5)), 1 / math.sqrt(2 * math.pi))
        return mul(g, add(cdf, mul(x, pdf)))

    def cost(out, x, *, approximate):
        # COUNTING.md: erf form 5 per element (scale, erf, add, mul, mul); tanh form 8
        return io_cost(out, (x,), flops=(8 if approximate == "tanh" else 5) * numel(out))


@register_op("silu")
class Silu(_Activation):
    ptflops = "zero"  # ptflops has no SiLU hook, so its tables count zero there
    def forward(xp, x):
        return x * _stable_sigmoid(xp, x)

    def _cpu(xp, x):
        compiled = _compiled(xp, x)
        if compiled is not None:  # one pass, the same bits as the two steps above
            return compiled.unary(compiled.silu_float32, x)
        return Silu.forward(xp, x)

    kernels = {"cpu": _cpu, "cuda": cuda_kernels.activation("silu")(forward)}

    def vjp(g, out, x):
        s = sigmoid(x)
        return mul(g, mul(s, add(mul(x, sub(1.0, s)), 1.0)))  # s·(1 + x(1 − s))

    flops = 5  # sigmoid (4) and the multiply by x


@register_op("hardsigmoid")
class Hardsigmoid(_Activation):
    def forward(xp, x):
        return xp.clip(x + 3, 0, 6) / 6

    kernels = {"cuda": cuda_kernels.activation("hardsigmoid")(forward)}

    def vjp(g, out, x):
        return where(logical_and(gt(x, -3.0), lt(x, 3.0)), mul(g, 1 / 6), 0.0)

    flops = 3  # add 3, clamp to [0, 6], divide by 6


@register_op("hardswish")
class Hardswish(_Activation):
    def forward(xp, x):
        compiled = _compiled(xp, x)
        if compiled is not None:
            return compiled.unary(compiled.hardswish_float32, x)
        return x * xp.clip(x + 3, 0, 6) / 6

    kernels = {"cuda": cuda_kernels.activation("hardswish")(forward)}

    def vjp(g, out, x):
        # as PyTorch's hardswish_backward: 0 below -3, x/3 + 1/2 up to 3 (inclusive), 1 above
        middle = mul(g, add(mul(x, 1 / 3), 0.5))
        return where(lt(x, -3.0), 0.0, where(le(x, 3.0), middle, g))

    flops = 4  # hardsigmoid (3) and the multiply by x


@register_op("softplus")
class Softplus(_Activation):
    """log(1 + exp(beta·x)) / beta, and x itself where beta·x > threshold (as PyTorch)."""

    def forward(xp, x, *, beta, threshold):
        z = x * beta
        return select(xp, z > threshold, x, _softplus_kernel(xp, z) / beta)

    kernels = {"cuda": cuda_kernels.activation("softplus")(forward)}

    def vjp(g, out, x, *, beta, threshold):
        z = mul(x, beta) if beta != 1 else x
        return where(gt(z, threshold), g, mul(g, sigmoid(z)))

    def cost(out, x, *, beta, threshold):
        # exp, add 1, log, threshold select; scaling by beta and back adds 2 when beta != 1
        return io_cost(out, (x,), flops=(4 + 2 * (beta != 1)) * numel(out))


@register_op("mish")
class Mish(_Activation):
    def forward(xp, x):
        return x * xp.tanh(_softplus_kernel(xp, x))

    kernels = {"cuda": cuda_kernels.activation("mish")(forward)}

    def vjp(g, out, x):
        # d/dx x·tanh(sp(x)) = t + x·sigmoid(x)·(1 − t²), t = tanh(softplus(x))
        t = tanh(softplus(x, 1.0, math.inf))
        return mul(g, add(t, mul(mul(x, sigmoid(x)), sub(1.0, mul(t, t)))))

    flops = 5  # softplus (exp, add, log), tanh, multiply


@register_op("sigmoid", onnx="Sigmoid")
class Sigmoid(_Activation):
    def forward(xp, x):
        return _stable_sigmoid(xp, x)

    kernels = {"cuda": cuda_kernels.activation("sigmoid")(forward)}

    def vjp(g, out, x):
        return mul(g, mul(out, sub(1.0, out)))

    flops = 4  # neg, exp, add, divide


class _RowSoftmax(_Activation):
    """Shape and cost shared by softmax and log_softmax along ``dim``."""

    def shape(x, *, dim):
        check_float("softmax", x)
        return same_spec(x)

    flops = 5  # max, subtract, exp, sum, divide

    def sbp(out, x, *, dim):
        return unary(x, keep_dims=(dim % x.ndim,))  # each row along ``dim`` stays whole


@register_op("softmax")
class Softmax(_RowSoftmax):
    def forward(xp, x, *, dim):
        compiled = cpu_kernels.kernel("elementwise", xp)
        if compiled is not None and x.dtype == np.float32 and x.ndim and dim % x.ndim == x.ndim - 1 and x.size:
            # one compiled pass per row (its own exp: within 2 ulp, not numpy's bits)
            out = np.empty(x.shape, np.float32)
            rows = x.shape[-1]
            compiled.softmax_rows_float32(np.ascontiguousarray(x).reshape(-1, rows), out.reshape(-1, rows))
            return out
        e = x - x.max(axis=dim, keepdims=True)
        xp.exp(e, out=e)  # in place: one array of the input's size, not two
        e /= e.sum(axis=dim, keepdims=True)
        return e

    kernels = {"cuda": cuda_kernels.softmax(forward)}

    def vjp(g, out, x, *, dim):
        return mul(out, sub(g, reduce_sum(mul(g, out), dim, keepdim=True)))


@register_op("log_softmax")
class LogSoftmax(_RowSoftmax):
    def forward(xp, x, *, dim):
        shifted = x - x.max(axis=dim, keepdims=True)
        return shifted - xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))

    kernels = {"cuda": cuda_kernels.log_softmax(forward)}

    def vjp(g, out, x, *, dim):
        return sub(g, mul(exp(out), reduce_sum(g, dim, keepdim=True)))


# --- functional API ----------------------------------------------------------------------------
# ``inplace`` is accepted for PyTorch compatibility; the result is always a new tensor.

def relu(input, inplace: bool = False):
    """max(x, 0).

    >>> relu(rt.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    return apply(Relu, input)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    """x clamped to [min_val, max_val]."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val {min_val} cannot be greater than max_val {max_val}")
    return apply(Hardtanh, input, min_val=float(min_val), max_val=float(max_val))


def relu6(input, inplace: bool = False):
    """min(max(x, 0), 6): a hardtanh on [0, 6], as PyTorch computes it."""
    return hardtanh(input, 0.0, 6.0)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    """x for x > 0, else negative_slope·x."""
    return apply(LeakyRelu, input, negative_slope=float(negative_slope))


def prelu(input, weight):
    """leaky_relu whose slope is the tensor ``weight`` (one value, or one per channel)."""
    return apply(Prelu, input, weight)


def elu(input, alpha: float = 1.0, inplace: bool = False):
    """x for x > 0, else alpha·(exp(x) − 1)."""
    return apply(Elu, input, alpha=float(alpha), scale=1.0, input_scale=1.0)


def selu(input, inplace: bool = False):
    """scale·elu(x, alpha) with the self-normalizing constants."""
    return apply(Elu, input, alpha=SELU_ALPHA, scale=SELU_SCALE, input_scale=1.0)


def celu(input, alpha: float = 1.0, inplace: bool = False):
    """max(0, x) + min(0, alpha·(exp(x/alpha) − 1))."""
    if alpha == 0:
        raise ValueError("celu: alpha cannot be 0")
    return apply(Elu, input, alpha=float(alpha), scale=1.0, input_scale=1.0 / alpha)


def gelu(input, approximate: str = "none"):
    """x·Φ(x); ``approximate='tanh'`` uses the tanh approximation.

    >>> round(gelu(rt.tensor([1.0])).item(), 4)
    0.8413
    """
    return apply(Gelu, input, approximate=approximate)


def silu(input, inplace: bool = False):
    """x·sigmoid(x) (also called swish)."""
    return apply(Silu, input)


def mish(input, inplace: bool = False):
    """x·tanh(softplus(x))."""
    return apply(Mish, input)


def hardsigmoid(input, inplace: bool = False):
    """relu6(x + 3) / 6."""
    return apply(Hardsigmoid, input)


def hardswish(input, inplace: bool = False):
    """x·relu6(x + 3) / 6."""
    return apply(Hardswish, input)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    """log(1 + exp(beta·x)) / beta; linear where beta·x > threshold."""
    return apply(Softplus, input, beta=float(beta), threshold=float(threshold))


def logsigmoid(input):
    """log(sigmoid(x)) = −softplus(−x), computed without overflow."""
    return neg(softplus(neg(input), 1.0, math.inf))


def softsign(input):
    """x / (1 + |x|)."""
    return div(input, add(_abs(input), 1.0))


def tanhshrink(input):
    """x − tanh(x)."""
    return sub(input, tanh(input))


def glu(input, dim: int = -1):
    """a·sigmoid(b) where a and b are the two halves of ``input`` along ``dim``."""
    from .movement import chunk

    d = norm_dim("glu", dim, input.ndim)
    if input.shape[d] % 2:
        raise ShapeError(f"glu: dim {dim} of the input {input.shape} must have an even size")
    a, b = chunk(input, 2, d)
    return mul(a, sigmoid(b))


def sigmoid(input):
    """1 / (1 + exp(−x))."""
    return apply(Sigmoid, input)


def _row_softmax(op, input, dim, dtype):
    """``op`` (softmax or log_softmax) along ``dim`` of ``input``, cast to ``dtype`` first when
    one is given."""
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:  # PyTorch's legacy choice for calls that leave ``dim`` out
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return apply(op, input, dim=norm_dim(op.name, dim, input.ndim))


def softmax(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):
    """exp(x) / sum(exp(x)) along ``dim``.

    >>> softmax(rt.tensor([0.0, 0.0]), dim=0).tolist()
    [0.5, 0.5]
    """
    return _row_softmax(Softmax, input, dim, dtype)


def softmin(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):
    """softmax(−x) along ``dim``."""
    if dtype is not None:
        input = input.to(dtype)
    return softmax(neg(input), dim)


def log_softmax(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):
    """log(softmax(x)) along ``dim``, computed stably."""
    return _row_softmax(LogSoftmax, input, dim, dtype)
