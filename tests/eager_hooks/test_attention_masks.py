"""MultiheadAttention with masks: the eager view sees masks passed by name (module hooks with
keyword arguments), the ``flopcount`` module rule prices them, and the graph total equals the
eager total, module by module.

Shapes: batch 2, length 5, embedding 16, 4 heads, so n = 2·4·5·5 = 200 attention scores. The
masks cost, beyond attention without a mask: a bool mask becomes additive (one ``where`` per
mask element), a padding mask is added to the attention mask (n), the mask is added to the
scores (n); with ``is_causal`` and no padding mask the fused op masks itself (n).
"""

from __future__ import annotations

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from flopcount.runtime import nn
from module_formulas import formula_convention
from view_totals import view_differences

N, L, E, H = 2, 5, 16, 4
SCORES = N * H * L * L


def _causal(dtype: str):
    if dtype == "bool":
        return rt.tensor(np.triu(np.ones((L, L), bool), 1))
    return rt.tensor(np.triu(np.full((L, L), -np.inf), 1).astype(np.float32))


def _padding():
    return rt.tensor(np.array([[False] * L, [False] * 3 + [True] * 2]))


class SelfAttention(nn.Module):
    """Masks arrive as keyword arguments of the model and reach attention by name."""

    def __init__(self, need_weights: bool):
        super().__init__()
        self.attn = nn.MultiheadAttention(E, H, batch_first=True)
        self.need_weights = need_weights

    def forward(self, x, attn_mask=None, key_padding_mask=None, is_causal=False):
        return self.attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                         need_weights=self.need_weights, is_causal=is_causal)[0]


# name -> (model keyword arguments, extra FLOPs over the unmasked call: fused path, explicit path)
CASES = {
    "float attn_mask": (lambda: {"attn_mask": _causal("float")}, SCORES, SCORES),
    "bool attn_mask": (lambda: {"attn_mask": _causal("bool")}, L * L + SCORES, L * L + SCORES),
    "key_padding_mask": (lambda: {"key_padding_mask": _padding()}, N * L + SCORES, N * L + SCORES),
    "both": (lambda: {"attn_mask": _causal("float"), "key_padding_mask": _padding()},
             N * L + 2 * SCORES, N * L + 2 * SCORES),
    "both bool": (lambda: {"attn_mask": _causal("bool"), "key_padding_mask": _padding()},
                  L * L + N * L + 2 * SCORES, L * L + N * L + 2 * SCORES),
    "is_causal": (lambda: {"attn_mask": _causal("float"), "is_causal": True}, SCORES, SCORES),
}


def _both_views(model, x, kwargs, convention="flopcount"):
    """(eager, graph); under ``flopcount`` the eager view prices MultiheadAttention with its
    formula (``module_formulas.py``), so the graph's op rules are checked against it."""
    eager_convention = formula_convention() if convention == "flopcount" else convention
    eager = flopcount.profile(model, x, mode="eager", convention=eager_convention, **kwargs)
    graph = flopcount.profile(model, x, mode="graph", convention=convention, **kwargs)
    return eager, graph


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_masks_by_keyword_are_counted_and_the_views_agree(case, need_weights):
    model, x = SelfAttention(need_weights), rt.randn(N, L, E)
    make, fused_extra, explicit_extra = CASES[case]
    plain, _ = _both_views(model, x, {})
    eager, graph = _both_views(model, x, make())
    assert not view_differences(eager, graph), [str(d) for d in view_differences(eager, graph)]
    assert (eager.macs, eager.flops) == (graph.macs, graph.flops)
    assert eager.row("attn").counted_by == "rule"
    assert eager.flops - plain.flops == (explicit_extra if need_weights else fused_extra)
    assert eager.macs == plain.macs


class BuildsItsMask(nn.Module):
    """A causal bool mask made from constants inside forward, passed by position: a graph folds
    its conversion to an additive mask, so neither view counts that."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(E, H)

    def forward(self, x):
        mask = rt.tensor(np.triu(np.ones((x.shape[0], x.shape[0]), bool), 1))
        return self.attn(x, x, x, None, False, mask)[0]  # key_padding_mask, need_weights, attn_mask


def test_a_mask_built_from_constants_is_folded_in_both_views():
    model, x = BuildsItsMask(), rt.randn(L, N, E)
    eager, graph = _both_views(model, x, {})
    assert (eager.macs, eager.flops) == (graph.macs, graph.flops)
    unmasked = flopcount.profile(model.attn, x, x, x, need_weights=False, mode="eager")
    assert eager.flops - unmasked.flops == SCORES  # the mask is added to the scores, nothing more


def test_transformer_layers_pass_their_masks_by_keyword():
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 32, dropout=0.0), 2)
    x = rt.randn(L, N, E)
    eager, graph = _both_views(encoder, x, {"mask": _causal("float"), "src_key_padding_mask": _padding()})
    assert not view_differences(eager, graph), [str(d) for d in view_differences(eager, graph)]
    assert (eager.macs, eager.flops) == (graph.macs, graph.flops)


def test_ptflops_does_not_see_masks():
    # ptflops' MultiheadAttention hook has no mask term, so its eager number ignores them; its
    # graph-mode op rules price the add of the mask to the scores (explicit path) at one MAC
    # per score, and the fused attention op's rule has no mask term either
    x = rt.randn(N, L, E)
    for need_weights, gap in ((True, SCORES), (False, 0)):
        model = SelfAttention(need_weights)
        eager, graph = _both_views(model, x, {"attn_mask": _causal("float")}, convention="ptflops")
        plain = flopcount.profile(model, x, mode="eager", convention="ptflops")
        assert eager.macs == plain.macs
        assert graph.macs - eager.macs == gap


@pytest.mark.parametrize("causal", [True, False])
def test_causal_half_convention_halves_both_views_alike(causal):
    """FlopcountConvention(causal="half") leaves out the masked half of a causal attention's
    two contractions (n·D each, D = E / H) in the module rule and in the op rule alike."""
    from flopcount.conventions import FlopcountConvention

    model = SelfAttention(need_weights=False)
    x = rt.randn(N, L, E)
    kwargs = {"attn_mask": _causal("float"), "is_causal": True} if causal else {}
    full = flopcount.profile(model, x, mode="eager", convention=formula_convention(), **kwargs)
    eager = flopcount.profile(model, x, mode="eager", convention=formula_convention("half"), **kwargs)
    graph = flopcount.profile(model, x, mode="graph", convention=FlopcountConvention(causal="half"), **kwargs)
    dropped = SCORES * (E // H) if causal else 0
    assert full.macs - eager.macs == dropped and full.flops - eager.flops == 2 * dropped
    assert (eager.macs, eager.flops) == (graph.macs, graph.flops)
    assert not view_differences(eager, graph), [str(d) for d in view_differences(eager, graph)]
