"""Dropout: zero elements (or whole channels) at random and scale the rest by 1 / (1 − p).

The op returns the kept-elements mask as a second output, so the gradient reads it from the
tape instead of from hidden state, and the op is marked ``random`` (a tracer never folds it).
In evaluation, or with p = 0, the functional returns its input itself: no op runs.

Cost: 2 FLOPs per element (compare the random number with p, multiply by the scaled mask);
drawing the random numbers is not counted as arithmetic.
"""

from __future__ import annotations

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d"]  # the functional API (nn.functional re-exports it)

from .. import dtypes as _dt
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op
from ..random import keep_mask
from ..sbp import unary
from ._helpers import check_float, same_spec
from .elementwise import mul


def _mask_shape(x, channelwise: bool) -> tuple:
    # channel dropout draws one number per (sample, channel) and broadcasts it over the rest
    return tuple(x.shape[:2]) + (1,) * (x.ndim - 2) if channelwise else tuple(x.shape)


def _keep_scale(p: float) -> float:
    return 0.0 if p >= 1 else 1.0 / (1.0 - p)


@register_op("dropout", ptflops="zero")
class Dropout(Op):
    """(y, mask): y = x·mask / (1 − p), mask True where an element (or channel) is kept."""

    random = True  # draws a new mask at every run

    def shape(x, *, p, training, channelwise=False):
        check_float("dropout", x)
        if not 0.0 <= p <= 1.0:
            raise ShapeError(f"dropout: probability has to be between 0 and 1, but got {p}")
        if channelwise and x.ndim < 2:
            raise ShapeError(f"dropout: channel dropout needs an input (N, C, ...), got {x.shape}")
        return same_spec(x), Spec(_mask_shape(x, channelwise), _dt.bool_, x.device)

    def forward(xp, x, *, p, training, channelwise=False):
        shape = _mask_shape(x, channelwise)
        if not training:
            mask = xp.ones(shape, dtype=bool)
            return x.copy(), mask
        mask = keep_mask(xp, shape, p)
        return (x * mask * x.dtype.type(_keep_scale(p))).astype(x.dtype, copy=False), mask

    def vjp(g, out, x, *, p, training, channelwise=False):
        g, _ = g  # the mask is boolean: no gradient
        _, mask = out
        return mul(mul(g, mask), _keep_scale(p)) if training else g

    def cost(out, x, *, p, training, channelwise=False):
        # compare the random number with p, multiply by the scaled mask; none in evaluation
        return io_cost(out, (x,), flops=2 * numel(x) if training else 0)

    def sbp(out, x, *, p, training, channelwise=False):
        # each rank draws the mask of its own slice; a channel mask splits with its channels
        return [sig for sig in unary(x, n_outputs=2) if not channelwise or sig.inputs[0].dim < 2]


def _check_p(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout(input, p: float, training: bool, channelwise: bool):
    _check_p(p)
    if not training or p == 0:
        return input
    return apply(Dropout, input, p=float(p), training=True, channelwise=channelwise)[0]


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 − p).

    Returns ``input`` itself when not training or p = 0. ``inplace`` is accepted for PyTorch
    compatibility; the result is a new tensor.

    >>> dropout(x, 0.5, training=False) is x   # doctest: +SKIP
    True
    """
    return _dropout(input, p, training, channelwise=False)


def _maybe_unbatched(name: str, input, p: float, training: bool, spatial_dims: int):
    """Channel dropout of a batched (N, C, *spatial) or unbatched (C, *spatial) input."""
    if input.ndim not in (spatial_dims + 1, spatial_dims + 2):
        raise ShapeError(f"{name}: expects a {spatial_dims + 1}-d or {spatial_dims + 2}-d input, "
                         f"got shape {input.shape}")
    if input.ndim == spatial_dims + 2 or not training or p == 0:  # the last two: _dropout returns input
        return _dropout(input, p, training, channelwise=True)
    from .movement import squeeze, unsqueeze

    return squeeze(_dropout(unsqueeze(input, 0), p, training, channelwise=True), 0)


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of (N, C, L) or (C, L) input with probability ``p``."""
    return _maybe_unbatched("dropout1d", input, p, training, 1)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels (dim 1) of an (N, C, ...) input with probability ``p``.

    As in PyTorch, a 3-d input is read as (N, C, L), not as an unbatched image.
    """
    return _dropout(input, p, training, channelwise=True)


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input with probability ``p``."""
    return _maybe_unbatched("dropout3d", input, p, training, 3)
