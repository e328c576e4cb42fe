"""ATen ops that select or count by value, as MoE routers use them: ``topk``, ``sort``,
``argsort``, ``histc``, ``one_hot``. Each is the runtime op of the same meaning, priced by its
rule (COUNTING.md: comparisons counted as FLOPs)."""

from __future__ import annotations

from ...ops import embedding, histogram, selection
from ._base import converter


@converter("topk")
def topk(ctx, self, k, dim=-1, largest=True, sorted=True):
    # sorted=False leaves the order to the kernel: the sorted order is one valid answer
    return selection.topk(self, k, dim, largest, True)


@converter("sort")
def sort(ctx, self, dim=-1, descending=False, stable=None):
    # sort(self, dim, descending) or sort.stable(self, *, stable, dim, descending): the runtime's
    # sort is stable, which is one valid order for an unstable one
    return selection.sort(self, dim, descending)


@converter("argsort")
def argsort(ctx, self, dim=-1, descending=False, stable=None):
    return selection.sort(self, dim, descending)[1]


@converter("histc")
def histc(ctx, self, bins=100, min=0, max=0):
    return histogram.histc(self, bins, min, max)


@converter("one_hot")
def one_hot(ctx, self, num_classes=-1):
    # the class count torch found (num_classes=-1 reads the largest id) is the recorded width
    return embedding.one_hot(self, ctx.out_spec.shape[-1])
