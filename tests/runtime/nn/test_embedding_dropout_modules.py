"""Embedding (init, padding_idx, from_pretrained, torch weights) and the Dropout layers."""

import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import op_costs

nn = rt.nn


def test_embedding_init_and_padding_row():
    rt.manual_seed(0)
    emb = nn.Embedding(1000, 16, padding_idx=3)
    w = emb.weight.numpy()
    assert [(n, p.shape) for n, p in emb.named_parameters()] == [("weight", (1000, 16))]
    assert np.all(w[3] == 0)
    assert abs(w.std() - 1.0) < 0.05  # N(0, 1), as PyTorch
    out = emb(rt.tensor([[3, 5]]))
    assert out.shape == (1, 2, 16) and np.all(out.numpy()[0, 0] == 0)


def test_from_pretrained_freezes_by_default():
    table = rt.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    frozen = nn.Embedding.from_pretrained(table)
    assert not frozen.weight.requires_grad and list(frozen.parameters())[0] is frozen.weight
    np.testing.assert_array_equal(frozen(rt.tensor([2])).numpy(), [[6.0, 7.0, 8.0]])
    trainable = nn.Embedding.from_pretrained(table, freeze=False, padding_idx=0)
    trainable(rt.tensor([0, 1, 1])).sum().backward()
    np.testing.assert_array_equal(trainable.weight.grad.numpy()[:2], [[0, 0, 0], [2, 2, 2]])


def test_embedding_matches_torch():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.Embedding(10, 4, padding_idx=1)
    ours = nn.Embedding(10, 4, padding_idx=1)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    ids = np.array([[1, 2, 2], [9, 0, 1]])
    ya, yt = ours(rt.tensor(ids)), theirs(torch.tensor(ids))
    np.testing.assert_array_equal(ya.numpy(), yt.detach().numpy())
    ya.sum().backward()
    yt.sum().backward()
    np.testing.assert_array_equal(ours.weight.grad.numpy(), theirs.weight.grad.numpy())


def test_embedding_on_meta_costs_only_the_rows():
    with rt.meta():
        emb = nn.Embedding(50_000, 512)
    ids = rt.empty(2, 7, dtype=rt.int64, device="meta")
    cost = op_costs(lambda: emb(ids))["embedding"]
    assert cost.bytes_read == 2 * 7 * 512 * 4 + 2 * 7 * 8


@pytest.mark.parametrize("cls,shape", [("Dropout", (4, 5)), ("Dropout1d", (4, 3, 5)), ("Dropout2d", (4, 3, 2, 2)),
                                       ("Dropout3d", (4, 3, 2, 2, 2))])
def test_dropout_layers_train_and_eval(cls, shape):
    m = getattr(nn, cls)(p=0.5)
    assert repr(m) == f"{cls}(p=0.5, inplace=False)"
    x = rt.ones(*shape)
    y = m(x).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 0 < (y == 0).mean() < 1
    m.eval()
    assert m(x) is x


def test_dropout_rejects_bad_p():
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(-0.1)
