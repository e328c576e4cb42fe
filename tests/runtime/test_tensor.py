"""Tensor: factories, dtypes and promotion, conversion, indexing and Python operators."""

import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import op_costs


# --- factories ---------------------------------------------------------------------------------

def test_tensor_infers_dtypes_like_pytorch():
    assert rt.tensor([1, 2]).dtype is rt.int64
    assert rt.tensor([1.0, 2]).dtype is rt.float32
    assert rt.tensor(True).dtype is rt.bool_
    assert rt.tensor(np.zeros(2, dtype=np.float64)).dtype is rt.float64  # numpy keeps its dtype
    assert rt.tensor(np.zeros(2, dtype=np.int32)).dtype is rt.int32
    assert rt.tensor([[1, 2]], dtype=rt.float16).dtype is rt.float16
    assert rt.tensor(3.5).shape == () and rt.tensor(3.5).item() == 3.5


def test_tensor_copies_its_source_but_from_numpy_shares():
    a = np.arange(3.0)
    t = rt.tensor(a)
    a[0] = 100
    assert t.tolist() == [0.0, 1.0, 2.0]
    s = rt.from_numpy(a)
    a[1] = -1
    assert s.tolist() == [100.0, -1.0, 2.0]
    u = rt.tensor(t)
    assert u.data is not t.data and u.tolist() == t.tolist()


def test_shape_factories():
    assert rt.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert rt.ones((2,)).dtype is rt.float32
    assert rt.full((2, 2), 7).dtype is rt.int64 and rt.full((2, 2), 7).tolist() == [[7, 7], [7, 7]]
    assert rt.full((1,), 0.5).dtype is rt.float32
    assert rt.arange(5).tolist() == [0, 1, 2, 3, 4] and rt.arange(5).dtype is rt.int64
    np.testing.assert_allclose(rt.arange(0, 1, 0.25).numpy(), [0, 0.25, 0.5, 0.75])
    np.testing.assert_allclose(rt.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5), rtol=1e-7)
    assert rt.eye(2, 3).tolist() == [[1, 0, 0], [0, 1, 0]]
    assert rt.empty(4, 0).shape == (4, 0)
    like = rt.zeros_like(rt.ones(2, 3, dtype=rt.float64))
    assert like.shape == (2, 3) and like.dtype is rt.float64
    with pytest.raises(rt.ShapeError, match="negative dimension"):
        rt.zeros(-1, 2)


def test_random_factories_are_seeded_and_in_range():
    rt.manual_seed(123)
    a = rt.randn(1000)
    rt.manual_seed(123)
    b = rt.randn(1000)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert abs(float(a.mean())) < 0.15 and 0.85 < float(a.std()) < 1.15
    u = rt.rand(1000).numpy()
    assert u.min() >= 0 and u.max() < 1
    r = rt.randint(3, 7, (500,)).numpy()
    assert r.dtype == np.int64 and set(r.tolist()) == {3, 4, 5, 6}


def test_requires_grad_only_for_floats():
    assert rt.ones(2, requires_grad=True).requires_grad
    with pytest.raises(rt.ShapeError, match="only floating point"):
        rt.tensor([1, 2], requires_grad=True)


# --- dtypes and promotion -------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,expected", [
    (rt.int64, rt.float32, rt.float32), (rt.int32, rt.int64, rt.int64), (rt.float16, rt.float32, rt.float32),
    (rt.bool_, rt.int8, rt.int8), (rt.uint8, rt.int8, rt.int16), (rt.float64, rt.int64, rt.float64),
])
def test_tensor_tensor_promotion(a, b, expected):
    x, y = rt.ones(2, dtype=a), rt.ones(2, dtype=b)
    assert (x + y).dtype is expected and (y * x).dtype is expected


def test_python_scalars_do_not_widen_tensors():
    assert (rt.ones(2, dtype=rt.float16) * 2.5).dtype is rt.float16
    assert (rt.ones(2, dtype=rt.int32) + 1).dtype is rt.int32
    assert (rt.ones(2, dtype=rt.int32) + 1.5).dtype is rt.float32  # int tensor, float scalar
    assert (rt.tensor([True]) + 1).dtype is rt.int64
    assert (rt.tensor([1, 2]) / 2).dtype is rt.float32  # true division of integers
    assert (rt.tensor([7, -7]) // 2).tolist() == [3, -4]
    assert (2 - rt.tensor([1.0])).tolist() == [1.0]


def test_dtype_names_and_aliases():
    assert rt.get_dtype("float") is rt.float32 and rt.get_dtype("long") is rt.int64
    assert rt.get_dtype(np.float16) is rt.float16 and rt.get_dtype(bool) is rt.bool_
    assert rt.float is rt.float32 and rt.double is rt.float64 and rt.half is rt.float16
    with pytest.raises(TypeError, match="unknown dtype"):
        rt.get_dtype("complex7")


# --- conversion ------------------------------------------------------------------------------

def test_to_item_numpy():
    t = rt.tensor([[1.5, -2.25]])
    assert t.to(rt.float64).dtype is rt.float64 and t.double().numpy().dtype == np.float64
    assert t.to("cpu") is t  # nothing to do
    assert t.to(rt.float32) is t
    assert t.long().tolist() == [[1, -2]]
    assert t.to("cpu", rt.float16).dtype is rt.float16
    assert t.to(rt.ones(1, dtype=rt.float64)).dtype is rt.float64
    m = t.to("meta")
    assert m.device.type == "meta" and m.shape == (1, 2) and m.data is None
    with pytest.raises(rt.DeviceError, match="has no data"):
        m.numpy()
    with pytest.raises(rt.DeviceError, match="cannot move a meta tensor"):
        m.to("cpu")
    assert t[0, 1].item() == -2.25 and isinstance(t[0, 1].item(), float)
    with pytest.raises(rt.ShapeError, match="only one-element tensors"):
        t.item()
    assert float(rt.tensor([2.0])) == 2.0 and int(rt.tensor(3)) == 3
    assert np.asarray(t).dtype == np.float32
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(rt.ones(2))


def test_cast_is_an_op_and_detach_shares_data():
    t = rt.ones(3, requires_grad=True)
    costs = op_costs(lambda: t.to(rt.float16))
    assert costs["cast"].bytes_read == 12 and costs["cast"].bytes_written == 6
    d = t.detach()
    assert d.data is t.data and not d.requires_grad and d.is_leaf


# --- indexing --------------------------------------------------------------------------------

def test_basic_and_advanced_indexing_match_numpy():
    a = np.arange(60.0).reshape(3, 4, 5)
    t = rt.tensor(a)
    for index in [1, (slice(None), 2), (Ellipsis, -1), (slice(0, 3, 2), None, slice(1, 4)),
                  (0, slice(1, 3)), ([0, 2],), (slice(None), [3, 1]),
                  (np.array([True, False, True]),)]:
        np.testing.assert_array_equal(t[index].numpy(), a[index], err_msg=str(index))
    idx = rt.tensor([2, 0])
    np.testing.assert_array_equal(t[idx, 1].numpy(), a[[2, 0], 1])


def test_basic_indexing_is_a_free_view_and_advanced_indexing_copies():
    t = rt.randn(8, 8)
    assert op_costs(lambda: t[2:6, ::2])["getitem"].bytes_read == 0
    costs = op_costs(lambda: t[rt.tensor([1, 3])])
    assert costs["index"].bytes_written == 2 * 8 * 4


def test_setitem_updates_and_keeps_gradient_flowing():
    x = rt.ones(4, requires_grad=True)
    y = x * 2
    y[1:3] = rt.tensor([10.0, 20.0])
    assert y.tolist() == [2.0, 10.0, 20.0, 2.0]
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 0.0, 0.0, 2.0]  # overwritten entries take no gradient
    with pytest.raises(rt.ShapeError, match="leaf tensor that requires grad"):
        x[0] = 5.0


# --- operators -------------------------------------------------------------------------------

def test_arithmetic_operators_match_numpy():
    a = np.array([[1.5, -2.0, 3.0]])
    b = np.array([[2.0], [-0.5]])
    ta, tb = rt.tensor(a), rt.tensor(b)
    cases = [(ta + tb, a + b), (ta - tb, a - b), (ta * tb, a * b), (ta / tb, a / b), (ta ** 2, a ** 2),
             (2 ** ta, 2 ** a), (-ta, -a), (abs(ta), np.abs(a)), (ta % 2, np.mod(a, 2)), (1 / ta, 1 / a),
             (tb @ ta, b @ a), (ta.T, a.T), (3 - ta, 3 - a)]
    for got, want in cases:
        np.testing.assert_allclose(got.numpy(), want.astype(np.float32), rtol=1e-6)


def test_comparisons_and_logic():
    a = rt.tensor([1.0, 2.0, 3.0])
    assert (a > 1.5).tolist() == [False, True, True]
    assert (a == 2).tolist() == [False, True, False]
    assert (a != 2).dtype is rt.bool_
    assert ((a > 1) & (a < 3)).tolist() == [False, True, False]
    assert ((a < 2) | (a > 2)).tolist() == [True, False, True]
    assert (~(a > 1)).tolist() == [True, False, False]
    assert rt.where(a > 2, a, -a).tolist() == [-1.0, -2.0, 3.0]


def test_inplace_operators_rebind_and_leave_the_old_tensor_alone():
    a = rt.ones(2)
    alias = a
    a += 1
    assert a.tolist() == [2.0, 2.0] and alias.tolist() == [1.0, 1.0]


def test_methods_forward_to_ops():
    t = rt.tensor(np.arange(6.0).reshape(2, 3))
    assert t.sum().item() == 15.0
    assert t.mean(dim=1).tolist() == [1.0, 4.0]
    assert t.reshape(3, 2).shape == (3, 2) and t.view(-1).shape == (6,)
    assert t.permute(1, 0).shape == (3, 2) and t.unsqueeze(0).shape == (1, 2, 3)
    assert t.max().item() == 5.0 and t.argmax().item() == 5
    assert [p.shape for p in t.split(1, dim=1)] == [(2, 1)] * 3
    assert t.flatten().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert t.clamp(1, 4).tolist() == [[1.0, 1.0, 2.0], [3.0, 4.0, 4.0]]
    assert t.softmax(-1).sum(-1).tolist() == pytest.approx([1.0, 1.0])
    assert len(t) == 2 and [r.tolist() for r in t] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert t.size() == (2, 3) and t.size(1) == 3 and t.numel() == 6 and t.dim() == 2
    assert t.nbytes == 48 and t.element_size() == 8  # numpy's float64 is kept
    assert t.new_zeros(2).dtype is t.dtype and t.new_tensor([1]).dtype is t.dtype


def test_shape_errors_name_the_op_and_shapes():
    with pytest.raises(rt.ShapeError, match=r"add: shapes \(2, 3\) and \(4,\) cannot be broadcast"):
        rt.ones(2, 3) + rt.ones(4)
    with pytest.raises(rt.ShapeError, match=r"reshape: cannot reshape \(2, 3\)"):
        rt.ones(2, 3).reshape(4, 2)


def test_repr():
    assert repr(rt.tensor([1.0, 2.0])) == "tensor([1., 2.], dtype=float32)"
    assert repr(rt.zeros(2, device="meta")) == "tensor(..., size=(2,), dtype=float32, device='meta')"
    assert "requires_grad=True" in repr(rt.ones(1, requires_grad=True))
