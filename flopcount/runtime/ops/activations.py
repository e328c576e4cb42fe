"""Activations and softmax.

Cost (COUNTING.md): relu-like ops 1 FLOP per element; sigmoid 4 (neg, exp, add, div);
softmax and log_softmax 5 per element (max, subtract, exp, sum, divide).
"""

from __future__ import annotations

__all__ = ["relu", "sigmoid", "softmax", "log_softmax"]  # the functional API (nn.functional re-exports it)

from ..dispatch import apply
from ..registry import Op, io_cost, numel, register_op
from ._helpers import check_float, norm_dim, same_spec
from .elementwise import exp, gt, mul, sub, where
from .reduction import sum as reduce_sum


@register_op("relu")
class Relu(Op):
    def shape(x):
        return same_spec(x)

    def forward(xp, x):
        return xp.maximum(x, 0)

    def vjp(g, out, x):
        return where(gt(out, 0), g, 0.0)

    def cost(out, x):
        return io_cost(out, (x,), flops=numel(out))  # one compare-select per element


@register_op("sigmoid")
class Sigmoid(Op):
    def shape(x):
        check_float("sigmoid", x)
        return same_spec(x)

    def forward(xp, x):
        # 1 / (1 + exp(-x)) overflows for very negative x in float16/32; this form does not
        e = xp.exp(-xp.abs(x))
        return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)

    def vjp(g, out, x):
        return mul(g, mul(out, sub(1.0, out)))

    def cost(out, x):
        return io_cost(out, (x,), flops=4 * numel(out))  # neg, exp, add, divide


class _RowSoftmax(Op):
    """Shape and cost shared by softmax and log_softmax along ``dim``."""

    def shape(x, *, dim):
        check_float("softmax", x)
        return same_spec(x)

    def cost(out, x, *, dim):
        return io_cost(out, (x,), flops=5 * numel(out))  # max, subtract, exp, sum, divide


@register_op("softmax")
class Softmax(_RowSoftmax):
    def forward(xp, x, *, dim):
        e = xp.exp(x - x.max(axis=dim, keepdims=True))
        e /= e.sum(axis=dim, keepdims=True)
        return e

    def vjp(g, out, x, *, dim):
        return mul(out, sub(g, reduce_sum(mul(g, out), dim, keepdim=True)))


@register_op("log_softmax")
class LogSoftmax(_RowSoftmax):
    def forward(xp, x, *, dim):
        shifted = x - x.max(axis=dim, keepdims=True)
        return shifted - xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))

    def vjp(g, out, x, *, dim):
        return sub(g, mul(exp(out), reduce_sum(g, dim, keepdim=True)))


def relu(x, inplace: bool = False):
    """max(x, 0). ``inplace`` is accepted for PyTorch compatibility; the result is a new tensor."""
    return apply(Relu, x)


def sigmoid(x):
    return apply(Sigmoid, x)


def softmax(x, dim: int, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    return apply(Softmax, x, dim=norm_dim("softmax", dim, x.ndim))


def log_softmax(x, dim: int, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    return apply(LogSoftmax, x, dim=norm_dim("log_softmax", dim, x.ndim))
