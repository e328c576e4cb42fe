"""Indexing: basic slicing (a view), advanced indexing (a gather), assignment, gather, tril."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.indexing import GetItemBackward, IndexBackward, GatherBackward
from opcheck import Example, check_op, randn, run_example

X = randn(3, 4, 5)
IDX = np.array([2, 0, 2])
G_IDX = np.array([[0, 1, 4], [3, 3, 0]])


def _setitem(x, v):
    y = x * 1.0
    y[1, :, 2:4] = v
    return y


def _setitem_ref(x, v):
    y = x.copy()
    y[1, :, 2:4] = v
    return y


def _getitem_backward(g):
    return rt.apply(GetItemBackward, g, shape=(3, 4, 5), items=[["i", 1], ["s", 0, 4, 2]])


def _getitem_backward_ref(g):
    out = np.zeros((3, 4, 5))
    out[1, 0:4:2] = g
    return out


def _index_backward(g, i):
    return rt.apply(IndexBackward, g, i, shape=(3, 4), items=[["t", 0]])


def _index_backward_ref(g, i):
    out = np.zeros((3, 4))
    np.add.at(out, i, g)
    return out


def _gather_backward(g, i):
    return rt.apply(GatherBackward, g, i, dim=1, shape=(2, 5))


def _gather_backward_ref(g, i):
    out = np.zeros((2, 5))
    for r in range(2):
        for c in range(3):
            out[r, i[r, c]] += g[r, c]
    return out


EXAMPLES = {
    "getitem": Example(lambda x: x[1:, ::2, -1], [X], lambda x: x[1:, ::2, -1], flops=0),
    "getitem_backward": Example(_getitem_backward, [randn(2, 5)], _getitem_backward_ref),
    "index": Example(lambda x, i: x[:, i, 1:3], [X, IDX[:2]], lambda x, i: x[:, i, 1:3], flops=0),
    "index_backward": Example(_index_backward, [randn(3, 4), IDX], _index_backward_ref),
    "index_put": Example(_setitem, [X, randn(4, 2)], _setitem_ref),
    "gather": Example(lambda x, i: x.gather(1, i), [randn(2, 5), G_IDX], lambda x, i: np.take_along_axis(x, i, 1)),
    "gather_backward": Example(_gather_backward, [randn(2, 3), G_IDX], _gather_backward_ref),
    "tril": Example(lambda x: x.tril(1), [X], lambda x: np.tril(x, 1)),
    "triu": Example(lambda x: x.triu(-1), [X], lambda x: np.triu(x, -1)),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


@pytest.mark.parametrize("key", [
    (0,), (slice(None), 1), (Ellipsis, 2), (None, 1, Ellipsis), (slice(1, None), None, slice(None, None, -1)),
    (-1, slice(0, 3), 4),
])
def test_basic_indexing_matches_numpy(key):
    check_op(lambda x: x[key], [X], lambda x: x[key])


@pytest.mark.parametrize("make_key", [
    lambda i: (i,), lambda i: (slice(None), i), lambda i: (0, slice(None), i),
    lambda i: (i, slice(None), i), lambda i: (i[:, None], i[None, :]) if i.ndim == 1 else (i,),
])
def test_advanced_indexing_matches_numpy(make_key):
    idx = np.array([0, 2, 1])
    check_op(lambda x: x[make_key(rt.tensor(idx))], [X], lambda x: x[make_key(idx)])


def test_repeated_indices_accumulate_gradient():
    x = rt.tensor(np.ones(4), requires_grad=True)
    x[rt.tensor([1, 1, 3])].sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 0.0, 1.0]


def test_boolean_mask_eager_and_refused_on_meta():
    x = rt.tensor(X)
    np.testing.assert_allclose(x[x > 0].numpy(), X[X > 0])
    with pytest.raises(rt.ShapeError, match="data-dependent shape"):
        xm = x.to("meta")
        xm[xm > 0]


def test_index_select_and_out_of_range():
    check_op(lambda x, i: x.index_select(2, i), [X, IDX], lambda x, i: x[:, :, i])
    with pytest.raises(rt.ShapeError, match="index 7 is out of range"):
        rt.tensor(X)[0, 7]


def test_index_costs_only_the_gathered_bytes():
    from opcheck import op_costs

    table = rt.randn(1000, 8)
    ids = rt.tensor([1, 2, 3])
    cost = op_costs(lambda: table[ids])["index"]
    assert cost.bytes_read == 3 * 8 * 4 + 3 * 8 and cost.bytes_written == 3 * 8 * 4
