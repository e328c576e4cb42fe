"""bert_base: transformers' BertModel layout, parameter count, init, shapes, MACs, and outputs."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount import models
from opcheck import record
from text_checks import (eager_and_meta_outputs, outputs_with_transformers, state_shapes, transformers_on_meta,
                         transformers_reference)

D, FF, LAYERS, VOCAB, LENGTH = 768, 3072, 12, 30522, 128
SEQ = 32  # behaviour checks on the small model


@pytest.fixture(scope="module")
def bert():
    rt.manual_seed(0)
    return models.get("bert_base").eval()


@pytest.fixture(scope="module")
def small():
    """Two layers: the same code path per layer, fast enough to compare with transformers."""
    rt.manual_seed(1)
    return models.get("bert_base", num_hidden_layers=2).eval()


def test_parameter_count_is_the_published_one(bert):
    published = 109_482_240  # bert-base-uncased BertModel, pooler included
    assert sum(p.numel() for p in bert.parameters()) == published
    assert models.info("bert_base").params == published


def test_module_paths_and_shapes(bert):
    shapes = state_shapes(bert)
    # 5 embedding tensors, 16 per layer, 2 for the pooler
    assert len(shapes) == 5 + 16 * LAYERS + 2
    expected = {
        "embeddings.word_embeddings.weight": (VOCAB, D),
        "embeddings.position_embeddings.weight": (512, D),
        "embeddings.token_type_embeddings.weight": (2, D),
        "embeddings.LayerNorm.weight": (D,),
        "encoder.layer.11.attention.self.query.weight": (D, D),
        "encoder.layer.11.attention.self.value.bias": (D,),
        "encoder.layer.0.attention.output.dense.weight": (D, D),
        "encoder.layer.0.attention.output.LayerNorm.bias": (D,),
        "encoder.layer.3.intermediate.dense.weight": (FF, D),
        "encoder.layer.3.output.dense.weight": (D, FF),
        "encoder.layer.3.output.LayerNorm.weight": (D,),
        "pooler.dense.weight": (D, D),
    }
    for key, shape in expected.items():
        assert shapes[key] == shape, key
    # position ids and default token types are buffers but not state, as in transformers
    assert "embeddings.position_ids" not in shapes and "embeddings.token_type_ids" not in shapes


def test_initialization_follows_transformers(bert):
    q = bert.encoder.layer[0].attention.self.query
    assert abs(float(np.std(q.weight.numpy())) - 0.02) < 5e-4
    assert not q.bias.numpy().any()
    word = bert.embeddings.word_embeddings.weight.numpy()
    assert not word[0].any(), "the padding token's row (pad_token_id 0) starts at zero"
    assert abs(float(np.std(word[1:])) - 0.02) < 5e-4
    ln = bert.encoder.layer[5].output.LayerNorm
    assert (ln.weight.numpy() == 1).all() and not ln.bias.numpy().any()


def test_eager_and_meta_shapes(bert):
    (hidden, pooled), (m_hidden, m_pooled) = eager_and_meta_outputs(bert, "bert_base")
    assert hidden.shape == (1, LENGTH, D) and pooled.shape == (1, D)
    assert hidden.dtype is rt.float32 and np.isfinite(hidden.numpy()).all()
    assert (m_hidden.shape, m_hidden.dtype) == (hidden.shape, hidden.dtype)
    assert (m_pooled.shape, m_pooled.dtype) == (pooled.shape, pooled.dtype)
    assert m_hidden.device.type == "meta"


def _macs(model, *inputs, **kwargs):
    _, events = record(lambda: model(*inputs, **kwargs))
    return sum(e.cost.macs for e in events), events


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_macs_by_hand(implementation):
    with rt.meta():
        model = models.get("bert_base", attn_implementation=implementation)
    macs, events = _macs(model, models.example_input("bert_base", device="meta"))
    n = LENGTH
    per_layer = 4 * n * D * D + 2 * n * D * FF + 2 * n * n * D  # q, k, v, out; MLP; QKᵀ and PV
    assert macs == LAYERS * per_layer + D * D  # + the pooler on the first token
    names = [e.op.name for e in events]
    if implementation == "eager":
        assert names.count("matmul") == 2 * LAYERS and "scaled_dot_product_attention" not in names
    else:
        assert names.count("scaled_dot_product_attention") == LAYERS and "matmul" not in names


def _ids():
    """Shorter sequences for the behaviour checks: the code path is the same, the run 4x cheaper."""
    return models.example_input("bert_base").numpy()[:, :SEQ]


def test_attention_mask_hides_padding(small):
    ids = _ids()
    mask = np.ones_like(ids)
    mask[:, 24:] = 0
    other = ids.copy()
    other[:, 24:] = 7  # change only the padded tokens
    with rt.no_grad():
        a, _ = small(rt.tensor(ids), attention_mask=rt.tensor(mask))
        b, _ = small(rt.tensor(other), attention_mask=rt.tensor(mask))
        c, _ = small(rt.tensor(other))
    np.testing.assert_allclose(a.numpy()[:, :24], b.numpy()[:, :24], atol=1e-5)
    assert np.abs(a.numpy()[:, :24] - c.numpy()[:, :24]).max() > 1e-3  # unmasked, they do matter


def test_unknown_attention_implementation_is_refused(small):
    with pytest.raises(ValueError, match="attn_implementation"):
        small.set_attn_implementation("flash")
    with pytest.raises(ValueError, match="attn_implementation"):
        models.get("bert_base", num_hidden_layers=1, attn_implementation="flash")


# --- against transformers (skipped where it is not installed) ---------------------------------

@pytest.fixture(scope="module")
def reference(small):
    """transformers' BertModel with the small config; ``small`` gets its weights."""
    return transformers_reference(
        small, lambda t: t.BertModel(t.BertConfig(num_hidden_layers=2, attn_implementation="eager")))


def test_state_dict_names_and_shapes_equal_transformers(bert):
    ref = transformers_on_meta(lambda t: t.BertModel(t.BertConfig()))
    assert state_shapes(bert) == state_shapes(ref)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_outputs_match_transformers(small, reference, implementation):
    ids = _ids()
    mask = np.ones_like(ids)
    mask[:, 20:] = 0
    types = np.zeros_like(ids)
    types[:, 12:] = 1
    for kwargs in ({}, {"attention_mask": mask, "token_type_ids": types}):
        (hidden, pooled), out = outputs_with_transformers(small, reference, ids, kwargs, implementation)
        assert np.abs(hidden.numpy() - out.last_hidden_state.numpy()).max() < 1e-4
        assert np.abs(pooled.numpy() - out.pooler_output.numpy()).max() < 1e-4
