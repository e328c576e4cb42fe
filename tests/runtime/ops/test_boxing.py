"""The boxing ops: each rank's shape rule, the bytes it sends, and the collective over every
rank's value against numpy's concatenations and sums."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.boxing import (AllGather, AllReduce, AllToAll, LocalSlice, ReduceScatter,
                                          SendRecv, ToPartial)
from flopcount.runtime.registry import Spec
from flopcount.runtime.device import META
from flopcount.runtime.sbp import S, slice_of

from opcheck import Example, randn, run_example

X = randn(4, 6)


def _one_rank(op, **attrs):
    # a group of one rank: every collective is the identity (no gradient rule: grad=False)
    return Example(lambda x: rt.apply(op, x, axis="tp", n=1, **attrs), [X], lambda x: x, grad=False, flops=0)


EXAMPLES = {
    "all_reduce": _one_rank(AllReduce),
    "reduce_scatter": _one_rank(ReduceScatter, dim=1),
    "all_gather": _one_rank(AllGather, dim=0),
    "all_to_all": _one_rank(AllToAll, gather_dim=0, scatter_dim=1),
    "send_recv": _one_rank(SendRecv, src=0, dst=1),
    "local_slice": _one_rank(LocalSlice, dim=0),
    "to_partial": _one_rank(ToPartial),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def _parts(whole, sbp, n):
    return [np.concatenate([np.take(whole, np.arange(a, b), axis=sbp.dim)
                            for a, b in slice_of(whole.shape[sbp.dim], sbp, n, r)], axis=sbp.dim)
            for r in range(n)]


@pytest.mark.parametrize("blocks", [1, 3])
def test_all_gather_joins_the_ranks_slices(blocks):
    whole = randn(2, 12)
    parts = _parts(whole, S(1, blocks), 2)
    for got in AllGather.collective(np, parts, axis="tp", n=2, dim=1, blocks=blocks):
        np.testing.assert_array_equal(got, whole)


def test_all_reduce_and_reduce_scatter_sum_the_partial_values():
    parts = [randn(4, 6, seed=s) for s in range(3)]
    total = parts[0] + parts[1] + parts[2]
    for got in AllReduce.collective(np, parts, axis="dp", n=3):
        np.testing.assert_allclose(got, total)
    scattered = ReduceScatter.collective(np, [p[:3] for p in parts], axis="dp", n=3, dim=0)
    np.testing.assert_allclose(np.concatenate(scattered, axis=0), total[:3])


def test_all_to_all_moves_the_split_from_one_dim_to_another():
    whole = randn(4, 6)
    by_rows = _parts(whole, S(0), 2)
    by_cols = AllToAll.collective(np, by_rows, axis="tp", n=2, gather_dim=0, scatter_dim=1)
    for got, want in zip(by_cols, _parts(whole, S(1), 2)):
        np.testing.assert_array_equal(got, want)


def test_local_slice_and_to_partial_need_no_other_rank():
    whole = randn(4, 6)
    assert [p.shape for p in LocalSlice.collective(np, [whole, whole], axis="tp", n=2, dim=1)] == [(4, 3)] * 2
    parts = ToPartial.collective(np, [whole, whole], axis="tp", n=2)
    np.testing.assert_array_equal(parts[0] + parts[1], whole)


def test_bytes_sent_follow_the_ring_algorithms():
    x = Spec((4, 1024), rt.float32, META)  # 16 KiB on each rank
    n = 8
    assert AllReduce.cost(x, x, axis="tp", n=n).sent == 2 * (n - 1) * x.numel() * 4 // n
    whole = Spec((32, 1024), rt.float32, META)
    assert AllGather.cost(whole, x, axis="tp", n=n, dim=0).sent == (n - 1) * 32 * 1024 * 4 // n
    assert ReduceScatter.cost(x, whole, axis="tp", n=n, dim=0).sent == (n - 1) * 32 * 1024 * 4 // n
    assert SendRecv.cost(x, x, axis="pp", n=2, src=0, dst=1).sent == 4 * 1024 * 4
    assert LocalSlice.cost(x, whole, axis="tp", n=n, dim=0).sent == 0
    assert AllReduce.cost(x, x, axis="tp", n=n).axis == "tp"


def test_a_collective_over_several_ranks_cannot_run_on_one():
    with pytest.raises(rt.ShapeError, match="every rank"):
        rt.apply(AllReduce, rt.tensor(X), axis="tp", n=2)
