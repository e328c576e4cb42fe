"""An LSTM word-level language model: PyTorch examples' ``RNNModel`` (word_language_model).

Defaults are the "medium" Penn Treebank model of Zaremba et al. (2014): vocabulary 10,000,
embedding 650, two LSTM layers of 650 units, dropout 0.5, 35 steps of backpropagation through
time. Module names follow the example (``encoder``, ``rnn``, ``decoder``); the LSTM is batch
first, so the input is (batch, steps) token ids.

    >>> from flopcount import models
    >>> net = models.get("lstm_lm").eval()
    >>> net(models.example_input("lstm_lm")).shape
    (1, 35, 10000)
"""

from __future__ import annotations

from .. import runtime as rt
from ..runtime import nn
from ..runtime.nn import functional as F
from ._registry import register_model, token_input

__all__ = ["RNNModel", "lstm_lm"]


class RNNModel(nn.Module):
    """Embedding -> dropout -> LSTM -> dropout -> linear -> log-softmax over the vocabulary.

    ``forward(input_ids, hidden=None, return_hidden=False)`` returns log-probabilities
    (B, T, ntoken), and also the final ``(h, c)`` when ``return_hidden`` is set, to carry the
    state into the next chunk of text.
    """

    def __init__(self, ntoken: int = 10000, ninp: int = 650, nhid: int = 650, nlayers: int = 2,
                 dropout: float = 0.5, tie_weights: bool = False):
        super().__init__()
        self.ntoken, self.nhid, self.nlayers = ntoken, nhid, nlayers
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout, batch_first=True)
        self.decoder = nn.Linear(nhid, ntoken)
        self.init_weights()
        if tie_weights:
            if nhid != ninp:
                raise ValueError(f"RNNModel: tie_weights needs nhid == ninp, got nhid={nhid}, ninp={ninp}")
            self.decoder.weight = self.encoder.weight

    def init_weights(self) -> None:
        """The example's init: embedding and decoder weights U(-0.1, 0.1), decoder bias zero
        (the LSTM keeps PyTorch's default U(-1/√nhid, 1/√nhid))."""
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def init_hidden(self, batch: int, device=None):
        """Zero (h, c), each (nlayers, batch, nhid)."""
        shape = (self.nlayers, batch, self.nhid)
        return rt.zeros(*shape, device=device), rt.zeros(*shape, device=device)

    def forward(self, input_ids, hidden=None, return_hidden: bool = False):
        emb = self.drop(self.encoder(input_ids))
        output, hidden = self.rnn(emb, hidden)
        log_probs = F.log_softmax(self.decoder(self.drop(output)), dim=-1)
        return (log_probs, hidden) if return_hidden else log_probs


@register_model("lstm_lm", family="lstm_lm", inputs=token_input(35, 10000), params=19_780_400,
                description="2-layer LSTM language model, PTB medium (650 units)",
                ntoken=10000, ninp=650, nhid=650, nlayers=2, dropout=0.5, tie_weights=False)
def lstm_lm(**config) -> RNNModel:
    """The PTB "medium" LSTM language model; keyword arguments override ``RNNModel``'s."""
    return RNNModel(**config)
