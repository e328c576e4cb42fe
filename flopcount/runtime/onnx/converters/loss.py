"""Training losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, as the runtime's
``nll_loss`` (weights, ``ignore_index``, and the weighted mean over the targets kept) after a
``log_softmax`` for the latter.
"""

from __future__ import annotations

from ...ops import activations as act
from ...ops.loss import nll_loss
from ._base import converter

# the index nll_loss ignores when the node names none (a class index is never negative)
_NO_IGNORE = -(2 ** 62)


def _nll(ctx, logp, target, weight):
    ignore = ctx.attr("ignore_index")
    reduction = ctx.attr("reduction", "mean")
    if reduction not in ("none", "mean", "sum"):
        raise ctx.unsupported(f"reduction {reduction!r} is not one of none, mean, sum")
    return nll_loss(logp, target, weight, ignore_index=_NO_IGNORE if ignore is None else int(ignore),
                    reduction=reduction)


@converter("NegativeLogLikelihoodLoss")
def negative_log_likelihood(ctx, logp, target, weight=None):
    return _nll(ctx, logp, target, weight)


@converter("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy(ctx, scores, labels, weight=None):
    logp = act.log_softmax(scores, 1)
    loss = _nll(ctx, logp, labels, weight)
    return (loss, logp) if ctx.output_used(1) else loss
