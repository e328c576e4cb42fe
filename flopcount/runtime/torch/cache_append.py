"""A KV cache's append, found in a captured ATen graph and made the runtime's ``cache_append``.

transformers' cache layers grow by concatenation: ``keys = torch.cat([keys, new_keys], dim=-2)``.
Priced as a ``cat``, a decode step would copy the whole cache of every layer once per token,
which no serving engine does (their caches are preallocated and written in place). The runtime's
``cache_append`` op computes the same tensor and is priced as the new rows only
(``runtime/ops/cache.py``). ``mark_cache_appends`` rewrites each ``cat`` of a cache tensor (a
graph input the caller names) and new rows along dim -2 into ``flopcount::cache_append``, a torch
operator with the same result, which the importer converts into the runtime op.

    captured = record(model, (), {}, state=cache_tensors, ...)
    mark_cache_appends(captured, set(cache_tensors))
"""

from __future__ import annotations

_LIBRARY = None   # keeps the operator's definition alive


def cache_append_op():
    """``torch.ops.flopcount.cache_append.default``: ``cat([cached, new], dim=-2)``."""
    global _LIBRARY
    import torch

    if _LIBRARY is None:
        library = torch.library.Library("flopcount", "FRAGMENT")
        library.define("cache_append(Tensor cached, Tensor new) -> Tensor")
        library.impl("cache_append", lambda cached, new: torch.cat([cached, new], dim=-2),
                     "CompositeExplicitAutograd")
        _LIBRARY = library
    return torch.ops.flopcount.cache_append.default


def mark_cache_appends(captured, cache_inputs: set) -> int:
    """Rewrite, in ``captured.graph``, every ``aten.cat([cached, new], -2)`` whose first tensor is
    the placeholder of a name in ``cache_inputs``; returns how many were rewritten."""
    import torch

    op = cache_append_op()
    count = 0
    for node in captured.graph.nodes:
        if node.op != "call_function" or node.target is not torch.ops.aten.cat.default:
            continue
        tensors = node.args[0]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        if len(tensors) != 2:
            continue
        cached, new = tensors
        if getattr(cached, "op", None) != "placeholder" or cached.name not in cache_inputs:
            continue
        rank = len(cached.meta["val"].shape)
        if rank < 2 or dim not in (-2, rank - 2):
            continue
        node.target, node.args, node.kwargs = op, (cached, new), {}
        count += 1
    return count


__all__ = ["cache_append_op", "mark_cache_appends"]
