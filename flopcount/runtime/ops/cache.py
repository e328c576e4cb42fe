"""The KV cache's write: ``cache_append`` puts a step's new keys (or values) after the cached ones.

Cost: the new rows read and written, nothing for the rows already cached. A serving cache
(static, paged) preallocates its storage and writes a step's rows in place; reading the cached
rows is the attention's work, counted by the ops that read them. The numpy kernel concatenates,
because that is how an array grows here, not because the step copies the cache; a ``cat`` in
its place would price a decode step as a copy of the whole cache per layer.
"""

from __future__ import annotations

__all__ = ["cache_append"]  # the functional API (nn.functional re-exports it)

from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Cost, Op, Spec, nbytes, register_op
from .movement import narrow


@register_op("cache_append", ptflops="zero")
class CacheAppend(Op):
    """``cached`` (..., past, D) then ``new`` (..., n, D) along dim -2: the whole cache (..., past + n, D)."""

    computes = False  # moves or selects elements: runs on any dtype's storage

    def shape(cached, new):
        if cached.ndim != new.ndim or cached.ndim < 2 or cached.shape[:-2] != new.shape[:-2] \
                or cached.shape[-1] != new.shape[-1]:
            raise ShapeError(f"cache_append: new rows {new.shape} do not fit the cache {cached.shape} "
                             f"(all dims but -2 must agree)")
        if cached.dtype is not new.dtype:
            raise ShapeError(f"cache_append: dtypes differ (cache {cached.dtype.name}, new rows {new.dtype.name})")
        shape = cached.shape[:-2] + (cached.shape[-2] + new.shape[-2], cached.shape[-1])
        return Spec(shape, cached.dtype, cached.device)

    def forward(xp, cached, new):
        return xp.concatenate((cached, new), axis=-2)

    def vjp(g, out, cached, new):
        past = cached.shape[-2]
        g_cached = narrow(g, -2 % g.ndim, 0, past) if cached.requires_grad else None
        g_new = narrow(g, -2 % g.ndim, past, new.shape[-2]) if new.requires_grad else None
        return g_cached, g_new

    def cost(out, cached, new):
        return Cost(bytes_read=nbytes(new), bytes_written=nbytes(new))


def cache_append(cached, new):
    """The cache ``cached`` grown by ``new`` along dim -2 (see the module docstring for its cost).

    >>> import flopcount.runtime as rt
    >>> cache_append(rt.zeros(1, 2, 5, 4), rt.ones(1, 2, 1, 4)).shape
    (1, 2, 6, 4)
    """
    return apply(CacheAppend, cached, new)
