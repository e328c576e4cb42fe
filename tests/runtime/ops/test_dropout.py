"""Dropout: the mask is an output (so the gradient needs no hidden state), statistics of the
mask, channel dropout, evaluation mode, and cost."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.dropout import Dropout
from opcheck import Example, check_grad, op_costs, randn, run_example

F = rt.nn.functional
X = randn(4, 6)


def _seeded_dropout(x):
    rt.manual_seed(3)  # the same mask at every call: finite differences see one function
    return F.dropout(x, 0.3)


EXAMPLES = {
    # compare with p and multiply by the scaled mask: 2 per element
    "dropout": Example(_seeded_dropout, [X], flops=2 * X.size),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_output_is_input_times_scaled_mask_and_gradient_uses_the_same_mask():
    x = rt.tensor(X, requires_grad=True)
    y, mask = rt.apply(Dropout, x, p=0.25, training=True)
    keep = mask.numpy()
    assert mask.dtype is rt.bool and keep.shape == X.shape
    np.testing.assert_allclose(y.numpy(), X * keep / 0.75)
    (y * rt.tensor(X)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), X * keep / 0.75)


def test_about_p_of_the_elements_are_dropped():
    y = F.dropout(rt.ones(100_000), 0.3).numpy()
    assert abs((y == 0).mean() - 0.3) < 0.01
    np.testing.assert_allclose(np.unique(y), [0.0, 1 / 0.7], rtol=1e-6)
    assert abs(y.mean() - 1.0) < 0.02  # the scaling keeps the expectation


def test_seed_makes_it_reproducible_and_calls_differ():
    rt.manual_seed(11)
    a = F.dropout(rt.ones(50), 0.5).numpy()
    b = F.dropout(rt.ones(50), 0.5).numpy()
    rt.manual_seed(11)
    assert np.array_equal(F.dropout(rt.ones(50), 0.5).numpy(), a)
    assert not np.array_equal(a, b)


def test_eval_and_zero_p_return_the_input_itself_and_dispatch_nothing():
    x = rt.tensor(X)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert op_costs(lambda: F.dropout(x, 0.5, training=False)) == {}


def test_p_one_zeroes_everything():
    assert np.all(F.dropout(rt.tensor(X), 1.0).numpy() == 0)


# ``lead``: the dims that index one channel (sample and channel, or channel alone when unbatched)
@pytest.mark.parametrize("fn,shape,lead", [(F.dropout1d, (8, 16, 5), 2), (F.dropout2d, (8, 16, 3, 3), 2),
                                           (F.dropout3d, (8, 16, 2, 2, 2), 2), (F.dropout1d, (16, 5), 1),
                                           (F.dropout3d, (16, 2, 2, 2), 1)])
def test_channel_dropout_zeroes_whole_channels(fn, shape, lead):
    y = fn(rt.ones(*shape), 0.5).numpy()
    per_channel = y.reshape(shape[:lead] + (-1,))
    dropped = (per_channel == 0).all(-1)
    assert np.all(dropped | (per_channel == 2).all(-1))
    assert 0 < dropped.mean() < 1


def test_channel_dropout_gradient():
    def fn(x):
        rt.manual_seed(5)
        return F.dropout2d(x, 0.5)

    check_grad(fn, [randn(2, 4, 3, 3)])


def test_bad_arguments():
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        F.dropout(rt.ones(3), 1.5)
    with pytest.raises(rt.ShapeError, match=r"dropout1d: expects a 2-d or 3-d input, got shape \(2, 3, 4, 5\)"):
        F.dropout1d(rt.ones(2, 3, 4, 5))
    with pytest.raises(rt.ShapeError, match="dropout: expects a floating point tensor"):
        F.dropout(rt.ones(3, dtype=rt.int64))


def test_meta_dropout_keeps_shapes():
    y = F.dropout(rt.empty(3, 4, device="meta"), 0.5)
    assert y.shape == (3, 4) and y.device.type == "meta"


def test_the_op_in_evaluation_mode_passes_values_through_at_no_cost():
    # the functional never dispatches it in evaluation; imported graphs may carry such a node
    x = rt.tensor(X)
    (y, mask), costs = rt.apply(Dropout, x, p=0.5, training=False), op_costs(
        lambda: rt.apply(Dropout, x, p=0.5, training=False))
    np.testing.assert_array_equal(y.numpy(), X)
    assert mask.numpy().all() and costs["dropout"].flops == 0
