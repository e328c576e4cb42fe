"""roberta_base: transformers' RobertaModel layout and parameter count; the heads' outputs
against transformers on the same weights (the folder tests, test_hf_folders.py, cover more)."""

import numpy as np

import flopcount.runtime as rt
from flopcount import models
from flopcount.models.roberta import RobertaConfig, RobertaForMaskedLM
from text_checks import state_shapes, transformers_on_meta, transformers_reference

ROBERTA_BASE = dict(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, layer_norm_eps=1e-5)


def test_parameter_count_and_layout_are_transformers():
    with rt.meta():
        ours = models.get("roberta_base")
    theirs = transformers_on_meta(lambda t: t.RobertaModel(t.RobertaConfig(**ROBERTA_BASE)))
    assert state_shapes(ours) == state_shapes(theirs)
    assert sum(p.numel() for p in ours.parameters()) == models.info("roberta_base").params == \
        theirs.num_parameters() == 124_645_632


def test_padding_shifts_positions_as_transformers():
    config = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64, vocab_size=60,
                  max_position_embeddings=514, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1)
    ours = RobertaForMaskedLM(RobertaConfig(**config)).eval()
    theirs = transformers_reference(ours, lambda t: t.RobertaForMaskedLM(t.RobertaConfig(**config)))
    ids = np.array([[0, 7, 9, 2, 1, 1], [0, 5, 5, 5, 5, 2]])   # padding (id 1) keeps position 1
    import torch

    with torch.no_grad():
        expected = theirs(torch.from_numpy(ids)).logits.numpy()
    with rt.no_grad():
        np.testing.assert_allclose(ours(rt.tensor(ids)).numpy(), expected, rtol=1e-4, atol=2e-5)
