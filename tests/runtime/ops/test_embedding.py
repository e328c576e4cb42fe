"""Embedding lookup and its scatter-add gradient, padding_idx, one_hot; cost counts only the
gathered rows."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.embedding import EmbeddingBackward
from opcheck import Example, check_op, op_costs, randn, run_example

F = rt.nn.functional
TABLE = randn(6, 4)
IDS = np.array([[0, 5, 2], [2, 2, 1]])


def _scatter_add_ref(g, ids):
    out = np.zeros((6, g.shape[-1]))
    np.add.at(out, ids.reshape(-1), g.reshape(-1, g.shape[-1]))
    return out


EXAMPLES = {
    "embedding": Example(lambda ids, w: F.embedding(ids, w), [IDS, TABLE], lambda ids, w: w[ids], flops=0),
    # one add per element of the incoming gradient
    "embedding_backward": Example(lambda g, ids: rt.apply(EmbeddingBackward, g, ids, num_weights=6),
                                  [randn(2, 3, 4, seed=1), IDS], _scatter_add_ref, flops=IDS.size * 4),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_bytes_are_the_gathered_rows_not_the_table():
    table = rt.zeros(1000, 8)
    ids = rt.tensor([1, 7, 7])
    cost = op_costs(lambda: F.embedding(ids, table))["embedding"]
    assert cost.bytes_read == 3 * 8 * 4 + 3 * 8  # rows (float32) and ids (int64)
    assert cost.bytes_written == 3 * 8 * 4
    assert cost.macs == cost.flops == 0


def test_repeated_ids_accumulate_and_padding_row_gets_no_gradient():
    w = rt.tensor(TABLE, requires_grad=True)
    F.embedding(rt.tensor(IDS), w, padding_idx=2).sum().backward()
    expected = np.zeros((6, 4))
    for i, count in zip(*np.unique(IDS, return_counts=True)):
        expected[i] = count
    expected[2] = 0
    np.testing.assert_array_equal(w.grad.numpy(), expected)


def test_negative_padding_idx_counts_from_the_end():
    w = rt.tensor(TABLE, requires_grad=True)
    F.embedding(rt.tensor(IDS), w, padding_idx=-1).sum().backward()
    assert np.all(w.grad.numpy()[5] == 0) and np.all(w.grad.numpy()[0] == 1)


def test_scale_grad_by_freq_divides_by_the_count_in_the_batch():
    w = rt.tensor(TABLE, requires_grad=True)
    F.embedding(rt.tensor(IDS), w, scale_grad_by_freq=True).sum().backward()
    np.testing.assert_allclose(w.grad.numpy()[2], np.ones(4))  # three uses, each scaled by 1/3
    np.testing.assert_allclose(w.grad.numpy()[3], np.zeros(4))


def test_double_backward_through_the_scatter():
    check_op(lambda g, ids: rt.apply(EmbeddingBackward, g, ids, num_weights=6, padding_idx=2),
             [randn(2, 3, 4, seed=2), IDS], lambda g, ids: np.where(np.arange(6)[:, None] == 2, 0,
                                                                    _scatter_add_ref(g, ids)))


def test_one_hot():
    out = F.one_hot(rt.tensor([[0, 3], [1, 1]]), 4)
    assert out.dtype is rt.int64
    np.testing.assert_array_equal(out.numpy(), np.eye(4, dtype=np.int64)[[[0, 3], [1, 1]]])
    assert F.one_hot(rt.tensor([2, 0])).shape == (2, 3)  # num_classes from the largest id


def test_errors():
    with pytest.raises(rt.ShapeError, match="embedding: ids must be an integer tensor, got float32"):
        F.embedding(rt.ones(3), rt.ones(4, 2))
    with pytest.raises(rt.ShapeError, match=r"embedding: weight must be 2-d .* got \(4,\)"):
        F.embedding(rt.tensor([1]), rt.ones(4))
    with pytest.raises(IndexError, match=r"embedding: ids must lie in \[0, 4\)"):
        F.embedding(rt.tensor([4]), rt.ones(4, 2))
    with pytest.raises(rt.ShapeError, match="padding_idx 7 must be within num_embeddings 4"):
        F.embedding(rt.tensor([1]), rt.ones(4, 2), padding_idx=7)
    with pytest.raises(NotImplementedError, match="max_norm"):
        F.embedding(rt.tensor([1]), rt.ones(4, 2), max_norm=1.0)
    with pytest.raises(rt.ShapeError, match="one_hot: num_classes must be given"):
        F.one_hot(rt.empty(3, dtype=rt.int64, device="meta"))


@pytest.mark.parametrize("padding_idx,scale", [(None, False), (1, False), (None, True)])
def test_matches_torch(padding_idx, scale):
    torch = pytest.importorskip("torch")
    table = TABLE.astype(np.float32)
    wa, wt = rt.tensor(table, requires_grad=True), torch.tensor(table, requires_grad=True)
    ya = F.embedding(rt.tensor(IDS), wa, padding_idx, scale_grad_by_freq=scale)
    yt = torch.nn.functional.embedding(torch.tensor(IDS), wt, padding_idx, scale_grad_by_freq=scale)
    g = randn(2, 3, 4, seed=3).astype(np.float32)
    (ya * rt.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    np.testing.assert_array_equal(ya.numpy(), yt.detach().numpy())
    np.testing.assert_allclose(wa.grad.numpy(), wt.grad.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(F.one_hot(rt.tensor(IDS), 6).numpy(),
                                  torch.nn.functional.one_hot(torch.tensor(IDS), 6).numpy())
