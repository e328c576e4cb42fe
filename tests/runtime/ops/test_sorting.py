"""topk: values and indices against numpy and torch.topk, ties to the lower index, the gradient
scattered back to the chosen entries, k comparisons per element."""

import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import Example, op_costs, randn, run_example

F = rt.nn.functional


def _ref_topk(x, k, dim):
    order = np.argsort(-x, axis=dim, kind="stable")
    index = np.take(order, np.arange(k), axis=dim)
    return np.take_along_axis(x, index, axis=dim), index


EXAMPLES = {
    # k passes over the dim, one comparison per element each
    "topk": Example(lambda x: F.topk(x, 2, dim=1), [randn(3, 5, 4)], lambda x: _ref_topk(x, 2, 1),
                    macs=0, flops=2 * 3 * 5 * 4),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_ties_go_to_the_lower_index_and_k_zero_is_empty():
    values, indices = rt.topk(rt.tensor([[1.0, 3.0, 3.0, 0.0]]), 2)
    assert indices.numpy().tolist() == [[1, 2]] and values.numpy().tolist() == [[3.0, 3.0]]
    values, indices = rt.topk(rt.ones(2, 3), 0)
    assert values.shape == indices.shape == (2, 0) and indices.dtype is rt.int64


def test_integer_input_and_cost():
    values, indices = rt.topk(rt.tensor(np.array([[5, 1, 9]], np.int64)), 1)
    assert values.numpy().tolist() == [[9]] and indices.numpy().tolist() == [[2]]
    cost = op_costs(lambda: rt.topk(rt.empty(7, 8, device="meta"), 2))["topk"]
    assert cost.flops == 2 * 7 * 8
    assert cost.bytes_read == 7 * 8 * 4 and cost.bytes_written == 7 * 2 * (4 + 8)


def test_errors():
    with pytest.raises(rt.ShapeError, match=r"topk: k must lie in \[0, 3\] for dim 1 of shape \(2, 3\), got 4"):
        rt.topk(rt.ones(2, 3), 4)
    with pytest.raises(rt.ShapeError, match="topk: dim 2 is out of range"):
        rt.topk(rt.ones(2, 3), 1, dim=2)


def test_matches_torch_values_indices_and_gradient():
    torch = pytest.importorskip("torch")
    x = randn(4, 8, seed=3).astype(np.float32)
    g = randn(4, 3, seed=4).astype(np.float32)
    ours = rt.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    v, i = rt.topk(ours, 3, dim=-1)
    tv, ti = torch.topk(theirs, 3, dim=-1)
    (v * rt.tensor(g)).sum().backward()
    (tv * torch.tensor(g)).sum().backward()
    np.testing.assert_array_equal(v.numpy(), tv.detach().numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())
