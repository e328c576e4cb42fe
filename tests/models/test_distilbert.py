"""distilbert_base: transformers' DistilBertModel layout and parameter count; outputs with an
attention mask against transformers on the same weights (test_hf_folders.py covers the heads)."""

import numpy as np

import flopcount.runtime as rt
from flopcount import models
from flopcount.models.distilbert import DistilBertConfig, DistilBertModel
from text_checks import state_shapes, transformers_on_meta, transformers_reference


def test_parameter_count_and_layout_are_transformers():
    with rt.meta():
        ours = models.get("distilbert_base")
    theirs = transformers_on_meta(lambda t: t.DistilBertModel(t.DistilBertConfig()))
    assert state_shapes(ours) == state_shapes(theirs)
    assert sum(p.numel() for p in ours.parameters()) == models.info("distilbert_base").params == \
        theirs.num_parameters() == 66_362_880


def test_outputs_with_padding_match_transformers():
    config = dict(n_layers=2, dim=32, n_heads=4, hidden_dim=64, vocab_size=60)
    ours = DistilBertModel(DistilBertConfig(**config)).eval()
    theirs = transformers_reference(ours, lambda t: t.DistilBertModel(t.DistilBertConfig(**config)))
    ids = np.array([[3, 7, 9, 2, 0, 0], [4, 5, 5, 5, 5, 2]])
    mask = (ids != 0).astype(np.int64)
    import torch

    with torch.no_grad():
        expected = theirs(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).last_hidden_state.numpy()
    with rt.no_grad():
        got = ours(rt.tensor(ids), attention_mask=rt.tensor(mask)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=2e-5)
