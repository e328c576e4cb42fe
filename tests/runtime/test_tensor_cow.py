"""Copy-on-write: a tensor whose data is a read-only array (an imported model's weights are
views of the file's bytes) can still be written in place by the runtime's in-place methods,
optimizers and load_state_dict; the array it was read from is never changed."""

from __future__ import annotations

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime import dtypes
from flopcount.runtime.device import CPU
from flopcount.runtime.tensor import Tensor


def _adopted(values, parameter: bool = False):
    """A tensor over a read-only view of a bytes buffer, as the ONNX importer makes them."""
    source = np.asarray(values, dtype=np.float32)
    buffer = source.tobytes()
    array = np.frombuffer(buffer, dtype=np.float32).reshape(source.shape)
    t = Tensor._make(array, source.shape, dtypes.float32, CPU)
    return (rt.nn.Parameter(t) if parameter else t), buffer, array


IN_PLACE = [
    ("add_", lambda t: t.add_(rt.tensor([1.0, 1.0, 1.0])), [2.0, 3.0, 4.0]),
    ("add_ alpha", lambda t: t.add_(rt.tensor([1.0, 1.0, 1.0]), alpha=2), [3.0, 4.0, 5.0]),
    ("sub_", lambda t: t.sub_(0.5), [0.5, 1.5, 2.5]),
    ("mul_", lambda t: t.mul_(3.0), [3.0, 6.0, 9.0]),
    ("div_", lambda t: t.div_(2.0), [0.5, 1.0, 1.5]),
    ("clamp_", lambda t: t.clamp_(min=1.5, max=2.5), [1.5, 2.0, 2.5]),
    ("copy_", lambda t: t.copy_(rt.tensor([7.0, 8.0, 9.0])), [7.0, 8.0, 9.0]),
    ("fill_", lambda t: t.fill_(4.0), [4.0, 4.0, 4.0]),
    ("zero_", lambda t: t.zero_(), [0.0, 0.0, 0.0]),
]


@pytest.mark.parametrize("name, write, expected", IN_PLACE, ids=[c[0] for c in IN_PLACE])
def test_in_place_methods_copy_a_read_only_array_once(name, write, expected):
    t, buffer, array = _adopted([1.0, 2.0, 3.0])
    assert not t.data.flags.writeable
    assert write(t) is t
    np.testing.assert_array_equal(t.numpy(), np.array(expected, np.float32))
    # the adopted array and the bytes under it are as they were
    np.testing.assert_array_equal(array, [1.0, 2.0, 3.0])
    assert buffer == np.array([1.0, 2.0, 3.0], np.float32).tobytes()
    # the copy is the tensor's own: the next write goes to it directly
    own = t.data
    assert own.flags.writeable and own is not array
    t.add_(1.0)
    assert t.data is own
    np.testing.assert_array_equal(own, np.array(expected, np.float32) + 1)


def test_writable_data_is_written_in_place_without_a_copy():
    t = rt.tensor([1.0, 2.0])
    data = t.data
    t.mul_(2.0).add_(1.0).clamp_(max=4.0)
    assert t.data is data
    np.testing.assert_array_equal(data, [3.0, 4.0])


def test_random_init_of_an_adopted_tensor():
    t, buffer, array = _adopted(np.zeros(1000))
    rt.manual_seed(0)
    t.uniform_(-1.0, 1.0)
    assert t.numpy().min() >= -1.0 and t.numpy().max() <= 1.0 and np.abs(t.numpy()).sum() > 0
    assert not array.any() and buffer == bytes(4000)


def test_an_optimizer_step_on_adopted_weights():
    # w <- w - lr * grad with SGD, and Adam's first step moves each weight by lr against its gradient
    w, buffer, array = _adopted([1.0, -2.0], parameter=True)
    w.grad = rt.tensor([0.5, -1.0])
    rt.optim.SGD([w], lr=0.1).step()
    np.testing.assert_allclose(w.numpy(), [0.95, -1.9])
    np.testing.assert_array_equal(array, [1.0, -2.0])
    v, _, source = _adopted([1.0, -2.0], parameter=True)
    v.grad = rt.tensor([0.5, -1.0])
    rt.optim.Adam([v], lr=0.1).step()
    np.testing.assert_allclose(v.numpy(), [0.9, -1.9], rtol=1e-5)
    np.testing.assert_array_equal(source, [1.0, -2.0])


def test_load_state_dict_into_adopted_weights():
    fc = rt.nn.Linear(2, 1)
    weight, _, array = _adopted([[1.0, 2.0]], parameter=True)
    fc.weight = weight
    fc.load_state_dict({"weight": rt.tensor([[5.0, 6.0]]), "bias": rt.tensor([0.5])})
    np.testing.assert_array_equal(fc.weight.numpy(), [[5.0, 6.0]])
    np.testing.assert_array_equal(array, [[1.0, 2.0]])
    np.testing.assert_allclose(fc(rt.tensor([[1.0, 1.0]])).numpy(), [[11.5]])


def test_meta_tensors_ignore_in_place_writes():
    t = rt.empty(3, device="meta")
    assert t.add_(1.0) is t and t.data is None
