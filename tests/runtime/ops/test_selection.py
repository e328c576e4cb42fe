"""topk, nonzero and unique: values against numpy, topk's gradient by finite differences, and
the value-dependent sizes (exact with data, the bound on meta)."""

import math

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.selection import nonzero, sort, topk, unique
from opcheck import Example, randn, run_example

X = randn(3, 6)
TIES = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 0.0]])
SPARSE = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
VALUES = np.array([3, 1, 3, 2, 1, 3])


def _topk_ref(x, k=3, largest=True):
    order = np.argsort(-x if largest else x, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(x, order, 1), order


def _unique_ref(x):
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    return values, first, inverse, counts


EXAMPLES = {
    # a heap of k = 3: ceil(log2 3) + 1 = 3 comparisons per element of the (3, 6) input
    "topk": Example(lambda x: topk(x, 3, 1), [X], _topk_ref, flops=18 * 3),
    # rows of 6: ceil(log2 6) = 3 comparisons per element of the (3, 6) input
    "sort": Example(lambda x: sort(x, 1, descending=True), [X], lambda x: _topk_ref(x, 6), flops=18 * 3),
    # value-dependent sizes: the meta shape is the bound (checked below), not the eager one
    "nonzero": Example(nonzero, [SPARSE], lambda x: np.stack(np.nonzero(x)), grad=False, meta=False, flops=6),
    "unique": Example(unique, [VALUES], _unique_ref, grad=False, meta=False, flops=6 * 3),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_sort_is_stable_both_ways():
    values, index = sort(rt.tensor(TIES), 1)
    assert index.tolist() == [[0, 3, 1, 2], [3, 0, 1, 2]] and values.tolist() == [[1, 2, 3, 3], [0, 5, 5, 5]]
    values, index = sort(rt.tensor(TIES), 1, descending=True)
    assert index.tolist() == [[1, 2, 3, 0], [0, 1, 2, 3]]


def test_topk_keeps_equal_values_in_index_order():
    values, index = topk(rt.tensor(TIES), 3, 1)
    assert index.tolist() == [[1, 2, 3], [0, 1, 2]] and values.tolist() == [[3, 3, 2], [5, 5, 5]]
    values, index = topk(rt.tensor(TIES), 2, 1, largest=False)
    assert index.tolist() == [[0, 3], [3, 0]]


def test_topk_of_integers_near_their_limits():
    x = np.array([np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max], dtype=np.int64)
    assert topk(rt.tensor(x), 2, 0)[1].tolist() == [2, 1]
    u = np.array([0, 2 ** 64 - 1, 7], dtype=np.uint64)
    assert topk(rt.tensor(u.astype(np.int64)), 1, 0)[1].tolist() == [2]


def test_value_dependent_sizes_are_exact_with_data_and_bounded_on_meta():
    x = rt.tensor(SPARSE)
    assert nonzero(x).shape == (2, 3)
    assert nonzero(x.to("meta")).shape == (2, 6)        # every element could be nonzero
    v = rt.tensor(VALUES)
    assert [t.shape for t in unique(v)] == [(3,), (3,), (6,), (3,)]
    assert [t.shape for t in unique(v.to("meta"))] == [(6,), (6,), (6,), (6,)]


def test_a_graph_traced_on_meta_runs_with_the_exact_sizes():
    graph = rt.trace(lambda x: nonzero(x).sum(0), rt.tensor(SPARSE).to("meta"))
    assert graph.outputs[0].shape == (6,)
    out = rt.GraphModule(graph)(rt.tensor(SPARSE))
    assert out.tolist() == (np.stack(np.nonzero(SPARSE)).sum(0)).tolist()


def test_unique_in_order_of_first_occurrence_and_along_an_axis():
    values, first, inverse, counts = unique(rt.tensor(VALUES), sorted=False)
    assert values.tolist() == [3, 1, 2] and first.tolist() == [0, 1, 3]
    assert inverse.tolist() == [0, 1, 0, 2, 1, 0] and counts.tolist() == [3, 2, 1]
    rows = np.array([[1, 2], [0, 1], [1, 2]])
    values, _, inverse, counts = unique(rt.tensor(rows), dim=0)
    assert values.tolist() == [[0, 1], [1, 2]] and inverse.tolist() == [1, 0, 1] and counts.tolist() == [1, 2]


def test_topk_cost_follows_k():
    from opcheck import op_costs

    x = rt.randn(4, 1000)
    assert op_costs(lambda: topk(x, 1, 1))["topk"].flops == 4000
    assert op_costs(lambda: topk(x, 100, 1))["topk"].flops == 4000 * (math.ceil(math.log2(100)) + 1)
