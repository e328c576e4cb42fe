"""Indexing kernels on the GPU: the embedding lookup checks its ids with one device-to-host
read (one fused reduction) instead of two; CuPy's gather and scatter-add do the rest."""

from __future__ import annotations


def embedding(generic):
    """CUDA kernel of ``embedding``."""

    def run(xp, weight, ids, *, padding_idx=None, scale_grad_by_freq=False, offset=None):
        if offset is not None:  # one shard of the table: the generic masked lookup
            return generic(xp, weight, ids, padding_idx=padding_idx, offset=offset)
        n = weight.shape[0]
        if ids.size and bool(xp.logical_or(ids < 0, ids >= n).any()):  # the one sync
            raise IndexError(f"embedding: ids must lie in [0, {n}), got values in "
                             f"[{int(ids.min())}, {int(ids.max())}]")
        return xp.take(weight, ids, axis=0)

    return run
