"""N-ary sum, maximum, minimum and mean: values against numpy, gradients against finite
differences, and the FLOPs of the binary chain they replace (one per element of each partial
result, COUNTING.md's rule for a binary op; a mean's division one per output element)."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.nary import add_n, maximum_n, mean_n, minimum_n
from opcheck import Example, op_costs, randn, run_example

# (3, 4), (4,), (3, 1): the chain's partial results are (3, 4) and (3, 4): 2·12 FLOPs
A, B, C = randn(3, 4), randn(4, seed=1), randn(3, 1, seed=2)



def _left(fn, xs):
    out = xs[0]
    for x in xs[1:]:
        out = fn(out, x)
    return out


EXAMPLES = {
    "add_n": Example(add_n, [A, B, C], lambda *xs: _left(np.add, xs), flops=24),
    "maximum_n": Example(maximum_n, [A, B, C], lambda *xs: _left(np.maximum, xs), flops=24),
    "minimum_n": Example(minimum_n, [A, B, C], lambda *xs: _left(np.minimum, xs), flops=24),
    "mean_n": Example(mean_n, [A, B, C], lambda *xs: _left(np.add, xs) / 3, flops=24 + 12),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_the_flops_are_the_binary_chains_whatever_the_order_of_broadcasting():
    """(4,) + (4,) + (3, 4): the chain adds 4 elements, then 12; the other order 12 and 12."""
    small, big = rt.tensor(randn(4)), rt.tensor(randn(3, 4))
    for inputs, chain in (((small, small, big), 4 + 12), ((big, small, small), 12 + 12)):
        ours = op_costs(lambda: add_n(*inputs))["add_n"].flops
        binary = op_costs(lambda: inputs[0] + inputs[1] + inputs[2])["add"].flops
        assert ours == binary == chain


def test_a_thousand_inputs_are_one_op_with_n_minus_1_adds_per_element():
    xs = [rt.tensor(randn(2, 3, seed=i).astype(np.float32)) for i in range(1000)]
    costs = op_costs(lambda: add_n(*xs))
    assert list(costs) == ["add_n"] and costs["add_n"].flops == 999 * 6
    assert costs["add_n"].bytes_read == 1000 * 6 * 4 and costs["add_n"].bytes_written == 6 * 4
    np.testing.assert_allclose(add_n(*xs).numpy(), np.sum([x.numpy() for x in xs], axis=0), rtol=1e-5)


@pytest.mark.parametrize("fn", [maximum_n, minimum_n])
def test_ties_share_the_gradient(fn):
    """Two inputs hold the result: each gets half, as the binary maximum splits a tie."""
    a = rt.tensor([1.0, 5.0], requires_grad=True)
    b = rt.tensor([1.0, 2.0], requires_grad=True)
    c = rt.tensor([1.0, 5.0 if fn is maximum_n else 2.0], requires_grad=True)
    fn(a, b, c).sum().backward()
    if fn is maximum_n:   # position 0: a three-way tie; position 1: a and c hold 5
        expected = ([1 / 3, 0.5], [1 / 3, 0.0], [1 / 3, 0.5])
    else:                 # position 1: b and c hold 2
        expected = ([1 / 3, 0.0], [1 / 3, 0.5], [1 / 3, 0.5])
    for t, e in zip((a, b, c), expected):
        np.testing.assert_allclose(t.grad.numpy(), e, rtol=1e-6)


def test_mean_of_integers_is_floating_and_broadcast_shapes_are_checked():
    out = mean_n(rt.tensor([1, 2]), rt.tensor([2, 4]))
    assert out.dtype is rt.float32 and out.tolist() == [1.5, 3.0]
    with pytest.raises(rt.ShapeError, match=r"add_n: shapes \(3,\) and \(4,\) cannot be broadcast"):
        add_n(rt.ones(3), rt.ones(3), rt.ones(4))


@pytest.mark.parametrize("convention", ["flopcount", "ptflops"])
def test_every_convention_counts_the_op_as_the_chain_it_replaces(convention):
    import flopcount

    xs = (rt.tensor(randn(4)), rt.tensor(randn(4)), rt.tensor(randn(3, 4)))
    for n_ary, chain in ((add_n, lambda a, b, c: a + b + c), (maximum_n, lambda a, b, c: rt.maximum(rt.maximum(a, b), c)),
                         (mean_n, lambda a, b, c: (a + b + c) / 3)):
        ours = flopcount.profile(rt.trace(n_ary, *xs), convention=convention)
        theirs = flopcount.profile(rt.trace(chain, *xs), convention=convention)
        assert (ours.macs, ours.flops) == (theirs.macs, theirs.flops) != (0, 0)
