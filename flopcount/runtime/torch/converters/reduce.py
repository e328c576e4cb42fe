"""Reduction ATen ops: sum, mean, max/min (all three overloads), arg-reductions, prod, var/std,
any/all, cumsum, logsumexp, norms. An empty ``dim`` list means every dim, as in ATen."""

from __future__ import annotations

from ...ops import elementwise as ew
from ...ops import reduction as red
from ._base import converter, same_arguments


def _dims(dim):
    """ATen's ``int[1]? dim``: None or [] is every dim."""
    if dim is None or (isinstance(dim, (list, tuple)) and not dim):
        return None
    return dim


same_arguments({"argmax": red.argmax, "argmin": red.argmin, "logsumexp": red.logsumexp})


@converter("sum")
def sum_(ctx, self, dim=None, keepdim=False, dtype=None):
    return red.sum(self, _dims(dim), keepdim, dtype=dtype)


@converter("mean")
def mean(ctx, self, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        self = ew.cast(self, dtype)
    return red.mean(self, _dims(dim), keepdim)


@converter("amax")
def amax(ctx, self, dim=(), keepdim=False):
    return red.amax(self, _dims(dim), keepdim)


@converter("amin")
def amin(ctx, self, dim=(), keepdim=False):
    return red.amin(self, _dims(dim), keepdim)


def _max_or_min(ctx, self, other, keepdim, elementwise, values, indices):
    if ctx.overload == "other":
        return elementwise(self, other)
    if other is None:  # the whole tensor
        return values(self)
    return values(self, other, keepdim), indices(self, other, keepdim)


@converter("max")
def max_(ctx, self, dim_or_other=None, keepdim=False):
    return _max_or_min(ctx, self, dim_or_other, keepdim, ew.maximum, red.amax, red.argmax)


@converter("min")
def min_(ctx, self, dim_or_other=None, keepdim=False):
    return _max_or_min(ctx, self, dim_or_other, keepdim, ew.minimum, red.amin, red.argmin)


@converter("prod")
def prod(ctx, self, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        self = ew.cast(self, dtype)
    return red.prod(self, dim, keepdim)


def _variance_args(ctx, args: tuple, kwargs: dict) -> tuple:
    """(dims, correction, keepdim) from any overload of var/std/var_mean."""
    if ctx.overload == "default":  # (self, unbiased=True)
        unbiased = args[0] if args else kwargs.get("unbiased", True)
        return None, int(bool(unbiased)), False
    dim = args[0] if args else kwargs.get("dim")
    if ctx.overload.startswith("correction"):  # (self, dim=None, *, correction=None, keepdim=False)
        correction = kwargs.get("correction")
        return _dims(dim), 1 if correction is None else correction, kwargs.get("keepdim", False)
    unbiased = args[1] if len(args) > 1 else kwargs.get("unbiased", True)  # (self, dim, unbiased, keepdim)
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    return _dims(dim), int(bool(unbiased)), keepdim


@converter("var")
def var(ctx, self, *args, **kwargs):
    dims, correction, keepdim = _variance_args(ctx, args, kwargs)
    return red.var(self, dims, keepdim=keepdim, correction=correction)


@converter("std")
def std(ctx, self, *args, **kwargs):
    dims, correction, keepdim = _variance_args(ctx, args, kwargs)
    return red.std(self, dims, keepdim=keepdim, correction=correction)


@converter("var_mean")
def var_mean(ctx, self, *args, **kwargs):
    dims, correction, keepdim = _variance_args(ctx, args, kwargs)
    return red.var(self, dims, keepdim=keepdim, correction=correction), red.mean(self, dims, keepdim)


@converter("any")
def any_(ctx, self, dim=None, keepdim=False):
    return red.any(self, _dims(dim), keepdim)


@converter("all")
def all_(ctx, self, dim=None, keepdim=False):
    return red.all(self, _dims(dim), keepdim)


@converter("cumsum")
def cumsum(ctx, self, dim, dtype=None):
    return red.cumsum(self, dim, dtype=dtype)


@converter("linalg_vector_norm")
def vector_norm(ctx, self, ord=2, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        self = ew.cast(self, dtype)
    return red.norm(self, ord, _dims(dim), keepdim)

