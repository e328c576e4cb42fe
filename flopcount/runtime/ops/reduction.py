"""Reductions: sum, mean, amax/amin, argmax/argmin, prod, all/any, cumsum, and composites built
from them (max/min with indices, var, std, logsumexp, norm).

Cost (COUNTING.md): a sum reads every input element once, numel(in) adds; a mean adds one
division per output element; a max/min is numel(in) comparisons.
"""

from __future__ import annotations

__all__ = ["sum", "mean", "amax", "amin", "argmax", "argmin", "max", "min", "prod", "all", "any", "cumsum", "var", "std", "logsumexp", "norm"]  # the functional API (nn.functional re-exports it)

import builtins
from collections import namedtuple
from math import prod as _prod

from .. import dtypes as _dt
from ..cuda import kernels as cuda_kernels
from ..dispatch import apply
from ..registry import Op, Spec, io_cost, numel, register_op
from ..sbp import P, S, Signature
from ._helpers import check_float, float_dtype, norm_dim, norm_dims

MaxMin = namedtuple("MaxMin", ["values", "indices"])  # as torch.return_types.max


def _reduced_shape(shape: tuple, dims: tuple, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _kept_dims_sbp(x, dims, keepdim, reduced=None, linear: bool = False) -> list:
    """Signatures of a reduction over ``dims``: a split along a kept dim stays a split (at its
    place in the output); a split along a reduced dim gives ``reduced`` (P for a sum: each rank
    sums its slice); partial sums pass through a ``linear`` reduction."""
    sigs = []
    for d in range(x.ndim):
        if x.shape[d] <= 1:
            continue
        if d not in dims:
            out_d = d if keepdim else d - builtins.sum(1 for r in dims if r < d)
            sigs.append(Signature((S(d),), (S(out_d),)))
        elif reduced is not None:
            sigs.append(Signature((S(d),), (reduced,)))
    if linear:
        sigs.append(Signature((P,), (P,)))
    return sigs


def _expand_back(g, x, dims, keepdim):
    """Broadcast a reduced gradient back to ``x``'s shape."""
    from .movement import expand, reshape

    if not keepdim:
        g = reshape(g, _reduced_shape(x.shape, dims, True))
    return expand(g, x.shape)


class _Reduce(Op):
    """Shape rule shared by reductions over ``dims`` (a normalized tuple) with ``keepdim``."""

    def shape(x, *, dims, keepdim):
        return Spec(_reduced_shape(x.shape, dims, keepdim), x.dtype, x.device)

    def cost(out, x, *, dims, keepdim):
        return io_cost(out, (x,), flops=numel(x))

    def sbp(out, x, *, dims, keepdim):
        return _kept_dims_sbp(x, dims, keepdim)


@register_op("sum")
class Sum(_Reduce):
    def shape(x, *, dims, keepdim):
        # integer and bool sums widen to int64, as in PyTorch
        dtype = x.dtype if x.dtype.is_floating_point else _dt.int64
        return Spec(_reduced_shape(x.shape, dims, keepdim), dtype, x.device)

    def forward(xp, x, *, dims, keepdim):
        return xp.sum(x, axis=dims, keepdims=keepdim)

    kernels = {"cuda": cuda_kernels.sum(forward)}

    def vjp(g, out, x, *, dims, keepdim):
        return _expand_back(g, x, dims, keepdim)

    def sbp(out, x, *, dims, keepdim):
        # each rank sums its slice of a reduced dim: the slices' sums add up to the sum
        return _kept_dims_sbp(x, dims, keepdim, reduced=P, linear=x.dtype.is_floating_point)


@register_op("mean")
class Mean(_Reduce):
    def shape(x, *, dims, keepdim):
        return Spec(_reduced_shape(x.shape, dims, keepdim), float_dtype(x.dtype), x.device)

    def forward(xp, x, *, dims, keepdim):
        return xp.mean(x, axis=dims, keepdims=keepdim)

    kernels = {"cuda": cuda_kernels.mean(forward)}

    def vjp(g, out, x, *, dims, keepdim):
        from .elementwise import div

        count = _prod(x.shape[d] for d in dims)
        return _expand_back(div(g, count), x, dims, keepdim)

    def cost(out, x, *, dims, keepdim):
        return io_cost(out, (x,), flops=numel(x) + numel(out))  # the adds, then one divide per output

    def sbp(out, x, *, dims, keepdim):
        # a slice's mean divides by the slice's count, not the whole's: no split of a reduced dim
        return _kept_dims_sbp(x, dims, keepdim, linear=True)


def _extreme_vjp(g, out, x, *, dims, keepdim):
    # The vjp of amax and amin: ties share the gradient evenly, as PyTorch's amax/amin backward.
    from .elementwise import cast, div, eq, mul

    out_full = _expand_back(out, x, dims, keepdim)
    mask = cast(eq(x, out_full), x.dtype)
    count = sum(mask, dims, keepdim=True)
    return mul(_expand_back(g, x, dims, keepdim), div(mask, _expand_back(count, x, dims, True)))


@register_op("amax")
class Amax(_Reduce):
    def forward(xp, x, *, dims, keepdim):
        return xp.max(x, axis=dims, keepdims=keepdim)

    vjp = staticmethod(_extreme_vjp)


@register_op("amin")
class Amin(_Reduce):
    def forward(xp, x, *, dims, keepdim):
        return xp.min(x, axis=dims, keepdims=keepdim)

    vjp = staticmethod(_extreme_vjp)


def _arg_extreme(find, x, dim, keepdim):
    # ``find`` is xp.argmax or xp.argmin; dim=None searches the flattened input
    if dim is None:
        r = find(x)
        return r.reshape((1,) * x.ndim) if keepdim else r
    return find(x, axis=dim, keepdims=keepdim)


@register_op("argmax", ptflops="zero")
class Argmax(Op):
    vjp = None  # integer output: no gradient

    def shape(x, *, dim, keepdim):
        if dim is None:
            return Spec((1,) * x.ndim if keepdim else (), _dt.int64, x.device)
        return Spec(_reduced_shape(x.shape, (dim,), keepdim), _dt.int64, x.device)

    def forward(xp, x, *, dim, keepdim):
        return _arg_extreme(xp.argmax, x, dim, keepdim)

    def cost(out, x, *, dim, keepdim):
        return io_cost(out, (x,), flops=numel(x))  # one comparison per element

    def sbp(out, x, *, dim, keepdim):
        return [] if dim is None else _kept_dims_sbp(x, (dim,), keepdim)


@register_op("argmin", ptflops="zero")
class Argmin(Op):
    vjp = None  # integer output: no gradient
    shape = Argmax.shape
    cost = Argmax.cost
    sbp = Argmax.sbp

    def forward(xp, x, *, dim, keepdim):
        return _arg_extreme(xp.argmin, x, dim, keepdim)


@register_op("prod")
class Prod(_Reduce):
    def forward(xp, x, *, dims, keepdim):
        return xp.prod(x, axis=dims, keepdims=keepdim)

    def vjp(g, out, x, *, dims, keepdim):
        from .elementwise import div, mul

        # d prod / dx_i = prod / x_i (inputs with zeros are not handled, as in simple kernels)
        return mul(_expand_back(g, x, dims, keepdim), div(_expand_back(out, x, dims, keepdim), x))


@register_op("all")
class All(_Reduce):
    vjp = None  # boolean output

    def shape(x, *, dims, keepdim):
        return Spec(_reduced_shape(x.shape, dims, keepdim), _dt.bool_, x.device)

    def forward(xp, x, *, dims, keepdim):
        return xp.all(x, axis=dims, keepdims=keepdim)


@register_op("any")
class Any(_Reduce):
    vjp = None  # boolean output
    shape = All.shape

    def forward(xp, x, *, dims, keepdim):
        return xp.any(x, axis=dims, keepdims=keepdim)


@register_op("cumsum")
class Cumsum(Op):
    """Running sums along ``dim``, accumulated in ``dtype`` (torch's ``cumsum(dtype=)``); without
    one, integers and bools accumulate in int64 (torch's promotion) and floats in their own dtype."""

    def shape(x, *, dim, dtype=None):
        return Spec(x.shape, _cumsum_dtype(x.dtype, dtype), x.device)

    def forward(xp, x, *, dim, dtype=None):
        # numpy would widen int32 to int64 on its own: the accumulator is named explicitly
        return xp.cumsum(x, axis=dim, dtype=_cumsum_dtype(_dt.get_dtype(x.dtype), dtype).np)

    def vjp(g, out, x, *, dim, dtype=None):
        from .movement import flip

        if not x.dtype.is_floating_point:
            return None
        grad = flip(cumsum(flip(g, (dim,)), dim), (dim,))
        return grad if grad.dtype is x.dtype else grad.to(x.dtype)

    def cost(out, x, *, dim, dtype=None):
        return io_cost(out, (x,), flops=numel(x))  # one add per element

    def sbp(out, x, *, dim, dtype=None):
        return _kept_dims_sbp(x, (dim,), True, linear=x.dtype.is_floating_point)


# --- functional API ----------------------------------------------------------------------------

def sum(x, dim=None, keepdim: bool = False, dtype=None):
    """Sum over ``dim`` (an int, a tuple, or None for all)."""
    if dtype is not None:
        from .elementwise import cast

        x = cast(x, dtype)
    return apply(Sum, x, dims=norm_dims("sum", dim, x.ndim), keepdim=keepdim)


def _over_dims(op):
    """The function ``fn(x, dim=None, keepdim=False)`` of reduction ``op`` over ``dim`` (an int, a
    tuple, or None for all)."""

    def fn(x, dim=None, keepdim: bool = False):
        return apply(op, x, dims=norm_dims(op.name, dim, x.ndim), keepdim=keepdim)

    fn.__name__ = fn.__qualname__ = op.name  # the name the module binds it to: it pickles by reference
    return fn


mean, amax, amin, prod, all, any = map(_over_dims, (Mean, Amax, Amin, Prod, All, Any))


def argmax(x, dim=None, keepdim: bool = False):
    return apply(Argmax, x, dim=None if dim is None else norm_dim("argmax", dim, x.ndim), keepdim=keepdim)


def argmin(x, dim=None, keepdim: bool = False):
    return apply(Argmin, x, dim=None if dim is None else norm_dim("argmin", dim, x.ndim), keepdim=keepdim)


def _max_or_min(x, dim, keepdim, elementwise, values, indices):
    from ..tensor import Tensor

    if isinstance(dim, Tensor):  # torch.max(a, b) is the elementwise maximum (min likewise)
        return elementwise(x, dim)
    if dim is None:
        return values(x)
    return MaxMin(values(x, dim, keepdim), indices(x, dim, keepdim))


def max(x, dim=None, keepdim: bool = False):
    """``max(x)`` is the largest element; ``max(x, dim)`` gives (values, indices)."""
    from .elementwise import maximum

    return _max_or_min(x, dim, keepdim, maximum, amax, argmax)


def min(x, dim=None, keepdim: bool = False):
    """``min(x)`` is the smallest element; ``min(x, dim)`` gives (values, indices)."""
    from .elementwise import minimum

    return _max_or_min(x, dim, keepdim, minimum, amin, argmin)


def _cumsum_dtype(dtype, asked):
    if asked is not None:
        return _dt.get_dtype(asked)
    return dtype if dtype.is_floating_point else _dt.int64


def cumsum(x, dim: int, dtype=None):
    """Running sums along ``dim``; ``dtype``: the accumulator's and the result's (as torch's).

    >>> import flopcount.runtime as rt
    >>> rt.cumsum(rt.tensor([1, 2, 3], dtype="int32"), 0, dtype="int32").dtype.name
    'int32'
    """
    dtype = None if dtype is None else _dt.get_dtype(dtype).name
    return apply(Cumsum, x, dim=norm_dim("cumsum", dim, x.ndim), dtype=dtype)


def var(x, dim=None, unbiased: bool = True, keepdim: bool = False, correction=None):
    """Variance: mean, subtract, square, sum, divide by (n - correction)."""
    from .elementwise import div, mul, sub

    check_float("var", x)
    dims = norm_dims("var", dim, x.ndim)
    if correction is None:
        correction = 1 if unbiased else 0
    count = _prod(x.shape[d] for d in dims)
    centered = sub(x, mean(x, dims, keepdim=True))
    return div(sum(mul(centered, centered), dims, keepdim), builtins.max(count - correction, 0))


def std(x, dim=None, unbiased: bool = True, keepdim: bool = False, correction=None):
    from .elementwise import sqrt

    return sqrt(var(x, dim, unbiased=unbiased, keepdim=keepdim, correction=correction))


def logsumexp(x, dim, keepdim: bool = False):
    """log(sum(exp(x))) computed stably around the maximum."""
    from .elementwise import add, exp, log, sub

    dims = norm_dims("logsumexp", dim, x.ndim)
    m = amax(x, dims, keepdim=True).detach()
    out = add(log(sum(exp(sub(x, m)), dims, keepdim=True)), m)
    if not keepdim:
        from .movement import reshape

        out = reshape(out, _reduced_shape(x.shape, dims, False))
    return out


def norm(x, p=2, dim=None, keepdim: bool = False):
    """The p-norm over ``dim`` (p = 1, 2 or inf)."""
    from .elementwise import abs as _abs, mul, sqrt

    if p in ("fro", 2):
        return sqrt(sum(mul(x, x), dim, keepdim))
    if p == 1:
        return sum(_abs(x), dim, keepdim)
    if p == float("inf"):
        return amax(_abs(x), dim, keepdim)
    raise ValueError(f"norm: p={p!r} is not supported (use 1, 2 or inf)")
