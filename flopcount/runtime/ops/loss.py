"""Loss functions, as composites of registered ops (log_softmax, gather, elementwise arithmetic,
reductions): none needs a kernel of its own, and each costs the sum of its parts.

Names, arguments and reductions follow ``torch.nn.functional``; the legacy ``size_average`` and
``reduce`` arguments are accepted and mapped to ``reduction`` as PyTorch does.
"""

from __future__ import annotations

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits"]  # the functional API (nn.functional re-exports it)

from ..errors import ShapeError
from .activations import log_softmax
from .elementwise import abs as _abs, add, cast, clamp, div, exp, log, lt, maximum, mul, ne, neg, sub, where
from .indexing import gather
from .movement import reshape, squeeze, unsqueeze
from .reduction import mean, sum as reduce_sum

REDUCTIONS = ("none", "mean", "sum")


def legacy_reduction(size_average, reduce, reduction: str) -> str:
    """PyTorch's mapping of the deprecated ``size_average``/``reduce`` flags to ``reduction``."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return ("mean" if size_average else "sum") if reduce else "none"


def _reduce(loss, reduction: str, op: str):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return reduce_sum(loss)
    if reduction == "mean":
        return mean(loss)
    raise ValueError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")


def _check_same_shape(op: str, input, target) -> None:
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(f"{op}: target {target.shape} must have the shape of the input {input.shape}")


def _target_weights(weight, target, valid):
    """weight[target] where ``valid``, else 0 (an ignored target still needs a valid index)."""
    safe = where(valid, target, 0)
    return where(valid, reshape(gather(weight, 0, reshape(safe, (-1,))), target.shape), 0.0)


def _class_view(weight, input):
    """A per-class weight (C,) viewed to broadcast along dim 1 (or dim 0 of an unbatched input)."""
    if input.ndim == 1:
        return weight
    return reshape(weight, (1, weight.shape[0]) + (1,) * (input.ndim - 2))


# --- classification ------------------------------------------------------------------------------

def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
             reduction: str = "mean"):
    """−input[n, target[n]]·weight[target[n]] for log-probabilities ``input`` (N, C, *) or (C,).

    The mean divides by the summed weights of the targets that are not ``ignore_index``.

    >>> nll_loss(rt.tensor([[-1.0, -2.0]]), rt.tensor([1])).item()
    2.0
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    op = "nll_loss"
    if target.dtype._rank != 1:
        raise ShapeError(f"{op}: target must hold class indices (an integer tensor), got {target.dtype.name}")
    unbatched = input.ndim == 1
    if unbatched:
        input, target = unsqueeze(input, 0), unsqueeze(target, 0)
    if input.ndim < 2 or tuple(target.shape) != (input.shape[0],) + tuple(input.shape[2:]):
        raise ShapeError(f"{op}: target {target.shape} does not fit input {input.shape} "
                         f"(expected input (N, C, *) and target (N, *))")
    if weight is not None and tuple(weight.shape) != (input.shape[1],):
        raise ShapeError(f"{op}: weight {weight.shape} should have one value per class ({input.shape[1]})")
    valid = ne(target, ignore_index)
    safe_target = where(valid, target, 0)  # an ignored target still needs a valid gather index
    picked = squeeze(gather(input, 1, unsqueeze(safe_target, 1)), 1)
    w = _target_weights(weight, target, valid) if weight is not None else cast(valid, input.dtype)
    loss = neg(mul(picked, w))
    if reduction == "mean":
        return div(reduce_sum(loss), reduce_sum(w))
    out = _reduce(loss, reduction, op)
    return squeeze(out, 0) if unbatched and reduction == "none" else out


def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0):
    """Cross entropy of logits ``input`` (N, C, *) or (C,) with class indices or class
    probabilities (a float ``target`` of the input's shape), as ``torch.nn.functional``.

    >>> round(cross_entropy(rt.tensor([[0.0, 0.0]]), rt.tensor([0])).item(), 4)
    0.6931
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    class_dim = 0 if input.ndim == 1 else 1
    logp = log_softmax(input, class_dim)
    n_classes = input.shape[class_dim]
    if target.dtype.is_floating_point:
        return _cross_entropy_probabilities(logp, target, weight, reduction, label_smoothing, class_dim)
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0:
        return nll
    # PyTorch's label smoothing: (1 − ε)·nll + ε/C · (−Σ_c w_c·logp_c), ignored targets masked
    weighted = mul(logp, _class_view(weight, logp)) if weight is not None else logp
    smooth = neg(reduce_sum(weighted, class_dim))
    valid = ne(target, ignore_index)
    smooth = where(valid, smooth, 0.0)
    if reduction == "mean":
        if weight is not None:
            smooth = div(reduce_sum(smooth), reduce_sum(_target_weights(weight, target, valid)))
        else:
            smooth = div(reduce_sum(smooth), reduce_sum(cast(valid, logp.dtype)))
    else:
        smooth = _reduce(smooth, reduction, "cross_entropy")
    return add(mul(nll, 1.0 - label_smoothing), mul(smooth, label_smoothing / n_classes))


def _cross_entropy_probabilities(logp, target, weight, reduction, label_smoothing, class_dim):
    _check_same_shape("cross_entropy", logp, target)
    n_classes = logp.shape[class_dim]
    if label_smoothing > 0:
        target = add(mul(target, 1.0 - label_smoothing), label_smoothing / n_classes)
    per_class = mul(logp, target)
    if weight is not None:
        per_class = mul(per_class, _class_view(weight, logp))
    loss = neg(reduce_sum(per_class, class_dim))
    if reduction == "mean":  # averaged over the batch elements, not weighted
        return div(reduce_sum(loss), max(logp.numel() // n_classes, 1))
    return _reduce(loss, reduction, "cross_entropy")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """−(t·log(x) + (1 − t)·log(1 − x)) for probabilities ``input``; the logs are clamped at
    −100 as in PyTorch, so x = 0 or 1 gives a finite loss."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_same_shape("binary_cross_entropy", input, target)
    log_x = clamp(log(input), min=-100.0)
    log_1mx = clamp(log(sub(1.0, input)), min=-100.0)
    loss = neg(add(mul(target, log_x), mul(sub(1.0, target), log_1mx)))
    if weight is not None:
        loss = mul(loss, weight)
    return _reduce(loss, reduction, "binary_cross_entropy")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction: str = "mean", pos_weight=None):
    """binary_cross_entropy(sigmoid(x), t) computed stably from logits:
    (1 − t)·x + (1 + (pos_weight − 1)·t)·softplus(−x)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_same_shape("binary_cross_entropy_with_logits", input, target)
    # softplus(−x) = max(−x, 0) + log(1 + exp(−|x|)) never overflows
    softplus_neg = add(maximum(neg(input), 0.0), log(add(exp(neg(_abs(input))), 1.0)))
    if pos_weight is not None:
        log_weight = add(mul(sub(pos_weight, 1.0), target), 1.0)
        softplus_neg = mul(log_weight, softplus_neg)
    loss = add(mul(sub(1.0, target), input), softplus_neg)
    if weight is not None:
        loss = mul(loss, weight)
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


# --- regression ----------------------------------------------------------------------------------

def _pointwise(op, input, target, weight, reduction, per_element):
    _check_same_shape(op, input, target)
    loss = per_element(sub(input, target))
    if weight is not None:
        loss = mul(loss, weight)
    return _reduce(loss, reduction, op)


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    """(x − y)², reduced.

    >>> mse_loss(rt.tensor([1.0, 3.0]), rt.tensor([0.0, 0.0])).item()
    5.0
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    return _pointwise("mse_loss", input, target, weight, reduction, lambda d: mul(d, d))


def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    """|x − y|, reduced."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    return _pointwise("l1_loss", input, target, weight, reduction, _abs)


def _huber(d, delta: float, scale: float):
    # quadratic inside |d| < delta, linear outside; ``scale`` divides both (smooth L1 uses 1/beta)
    a = _abs(d)
    quadratic = mul(mul(d, d), 0.5 * scale)
    linear = mul(sub(a, 0.5 * delta), delta * scale)
    return where(lt(a, delta), quadratic, linear)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0):
    """0.5·d²/beta where |d| < beta, else |d| − 0.5·beta; beta = 0 is the L1 loss."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if beta == 0:
        return l1_loss(input, target, reduction=reduction)
    return _pointwise("smooth_l1_loss", input, target, None, reduction,
                      lambda d: _huber(d, beta, 1.0 / beta))


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None):
    """0.5·d² where |d| < delta, else delta·(|d| − 0.5·delta)."""
    return _pointwise("huber_loss", input, target, weight, reduction, lambda d: _huber(d, delta, 1.0))
