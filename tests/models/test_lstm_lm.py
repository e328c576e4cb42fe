"""lstm_lm: the PTB "medium" LSTM language model (PyTorch examples' RNNModel)."""

import math

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount import models
from opcheck import record

VOCAB, EMB, HID, LAYERS, STEPS = 10000, 650, 650, 2, 35


def params_by_hand(vocab=VOCAB, emb=EMB, hid=HID, layers=LAYERS):
    embedding = vocab * emb
    lstm = 0
    for layer in range(layers):
        inp = emb if layer == 0 else hid
        lstm += 4 * hid * (inp + hid) + 2 * 4 * hid  # W_ih, W_hh and their two biases, 4 gates
    decoder = hid * vocab + vocab
    return embedding + lstm + decoder


@pytest.fixture(scope="module")
def lm():
    rt.manual_seed(0)
    return models.get("lstm_lm").eval()


def test_parameter_count_by_hand(lm):
    # 6,500,000 + 2 × 3,385,200 + 6,510,000
    assert params_by_hand() == 19_780_400 == models.info("lstm_lm").params
    assert sum(p.numel() for p in lm.parameters()) == params_by_hand()


def test_module_paths(lm):
    shapes = {k: tuple(v.shape) for k, v in lm.state_dict().items()}
    assert shapes["encoder.weight"] == (VOCAB, EMB)
    assert shapes["rnn.weight_ih_l0"] == (4 * HID, EMB)
    assert shapes["rnn.weight_hh_l1"] == (4 * HID, HID)
    assert shapes["rnn.bias_ih_l1"] == (4 * HID,)
    assert shapes["decoder.weight"] == (VOCAB, HID) and shapes["decoder.bias"] == (VOCAB,)
    assert len(shapes) == 1 + 4 * LAYERS + 2


def test_initialization(lm):
    for weight in (lm.encoder.weight.numpy(), lm.decoder.weight.numpy()):
        assert np.abs(weight).max() <= 0.1
        assert abs(float(np.std(weight)) - 0.1 / math.sqrt(3)) < 1e-3  # U(-0.1, 0.1)
    assert not lm.decoder.bias.numpy().any()
    bound = 1 / math.sqrt(HID)  # the LSTM keeps PyTorch's default
    assert np.abs(lm.rnn.weight_hh_l0.numpy()).max() <= bound


def test_eager_and_meta_shapes(lm):
    with rt.no_grad():
        log_probs = lm(models.example_input("lstm_lm"))
    assert log_probs.shape == (1, STEPS, VOCAB) and log_probs.dtype is rt.float32
    np.testing.assert_allclose(np.exp(log_probs.numpy()).sum(-1), 1.0, rtol=1e-4)
    with rt.meta():
        meta_model = models.get("lstm_lm")
    m_out = meta_model(models.example_input("lstm_lm", device="meta"))
    assert (m_out.shape, m_out.dtype, m_out.device.type) == (log_probs.shape, log_probs.dtype, "meta")


def test_hidden_state_carries_over(lm):
    ids = models.example_input("lstm_lm")
    with rt.no_grad():
        whole = lm(ids)
        first, hidden = lm(ids[:, :20], return_hidden=True)
        second = lm(ids[:, 20:], hidden)
    assert hidden[0].shape == hidden[1].shape == (LAYERS, 1, HID)
    np.testing.assert_allclose(first.numpy(), whole.numpy()[:, :20], atol=1e-5)
    np.testing.assert_allclose(second.numpy(), whole.numpy()[:, 20:], atol=1e-5)


def test_macs_by_hand():
    with rt.meta():
        model = models.get("lstm_lm")
    _, events = record(lambda: model(models.example_input("lstm_lm", device="meta")))
    lstm = STEPS * ((EMB + HID) * 4 * HID + (HID + HID) * 4 * HID)  # N·(in + h)·4·h per step and layer
    assert sum(e.cost.macs for e in events) == lstm + STEPS * HID * VOCAB


def test_matches_torch(lm):
    torch = pytest.importorskip("torch")

    class Reference(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Embedding(VOCAB, EMB)
            self.rnn = torch.nn.LSTM(EMB, HID, LAYERS, dropout=0.5, batch_first=True)
            self.decoder = torch.nn.Linear(HID, VOCAB)

        def forward(self, ids):
            output, _ = self.rnn(self.encoder(ids))
            return torch.log_softmax(self.decoder(output), dim=-1)

    torch.manual_seed(0)
    ref = Reference().eval()
    lm.load_state_dict({k: v.numpy() for k, v in ref.state_dict().items()}, strict=True)
    ids = models.example_input("lstm_lm").numpy()
    with rt.no_grad():
        ours = lm(rt.tensor(ids)).numpy()
    with torch.no_grad():
        theirs = ref(torch.from_numpy(ids)).numpy()
    assert np.abs(ours - theirs).max() < 1e-4
