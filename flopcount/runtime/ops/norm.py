"""Normalizations: batch, layer, group, instance and RMS norm.

Cost (COUNTING.md):
* batch norm, inference: 2 FLOPs per element (the folded scale and shift); training adds 4 per
  element for the statistics (mean sum, subtract, square, variance sum).
* layer / group norm (instance norm is a group norm with one channel per group): 5 per element
  (mean, subtract, square, variance sum, scale) + 1 per element for each of weight and bias.
* RMS norm: 3 per element (square, sum, scale) + 1 for the weight. It has no mean to subtract
  and no bias, so it does 3 of layer norm's 5 passes; this is the arithmetic of its kernel.

Gradients are composites of registered ops, except batch norm's in training: one fused
``batch_norm_backward`` op (8 per element) unless a graph of the gradient is being built.
Layer, group and RMS norm recompute their per-row statistics in the backward pass (their
forward keeps only its output), so that work is counted there; batch norm in training returns
the batch statistics as extra outputs, which both the running-statistics update and the
backward pass use.
"""

from __future__ import annotations

__all__ = ["batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm"]  # the functional API (nn.functional re-exports it)

from math import prod

import numpy as np

from .. import cpu_kernels
from ..cuda import kernels as cuda_kernels
from ..dispatch import apply, is_grad_enabled, no_grad
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op
from ..sbp import B, S, Signature, leading
from ._helpers import check_float, same_spec, upcast_half
from .elementwise import add, mul, rsqrt, sub
from .movement import reshape
from .reduction import mean, sum as reduce_sum


def _channel_shape(x) -> tuple:
    """(1, C, 1, ...): a per-channel vector viewed to broadcast against ``x`` (N, C, *)."""
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _channel_dims(x) -> tuple:
    """The dims a per-channel statistic of ``x`` (N, C, *) reduces: all but dim 1."""
    return (0,) + tuple(range(2, x.ndim))


def _check_vector(op: str, name: str, t, size: int, x) -> None:
    if t is not None and tuple(t.shape) != (size,):
        raise ShapeError(f"{op}: {name} has shape {tuple(t.shape)}, expected ({size},) for input {x.shape}")


def _standardize_grad(gxhat, xhat, rstd, dims):
    """Gradient through xhat = (x − mean)·rstd with the statistics taken over ``dims``:
    rstd·(gxhat − mean(gxhat) − xhat·mean(gxhat·xhat))."""
    centered = sub(gxhat, mean(gxhat, dims, keepdim=True))
    return mul(rstd, sub(centered, mul(xhat, mean(mul(gxhat, xhat), dims, keepdim=True))))


def _recompute_stats(x, dims, eps):
    """(xhat, rstd) over ``dims``, recomputed with registered ops for a backward pass."""
    centered = sub(x, mean(x, dims, keepdim=True))
    rstd = rsqrt(add(mean(mul(centered, centered), dims, keepdim=True), eps))
    return mul(centered, rstd), rstd


def _affine_grads(g, xhat, weight, bias, dims):
    """Gradients of ``xhat·weight + bias`` for the affine parameters, summed over ``dims``."""
    gw = reshape(reduce_sum(mul(g, xhat), dims), weight.shape) if weight is not None and weight.requires_grad else None
    gb = reshape(reduce_sum(g, dims), bias.shape) if bias is not None and bias.requires_grad else None
    return gw, gb


def _channel_dot(xp, a, b):
    """Σ a·b per channel (dim 1) of two arrays of one shape, without an a·b temporary."""
    letters = "abcdefghijklmnopqrstuvwxyz"[:a.ndim]
    return xp.einsum(f"{letters},{letters}->b", a, b)


# --- batch norm --------------------------------------------------------------------------------

@register_op("batch_norm", ptflops="affine_norm")
class BatchNorm(Op):
    """Normalization per channel (dim 1). In training the statistics are the batch's and the op
    returns (y, batch_mean, batch_var) with the biased variance; the caller updates running
    statistics from them. In inference it returns y from the running statistics.

    The statistics outputs are not differentiable (as PyTorch's native_batch_norm): their
    gradients are ignored by the vjp.
    """

    def shape(x, weight, bias, running_mean, running_var, *, training, momentum, eps):
        check_float("batch_norm", x)
        if x.ndim < 2:
            raise ShapeError(f"batch_norm: expects an input (N, C, ...) with at least 2 dims, got {x.shape}")
        c = x.shape[1]
        for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                        ("running_var", running_var)):
            _check_vector("batch_norm", name, t, c, x)
        if not training and (running_mean is None or running_var is None):
            raise ShapeError("batch_norm: running_mean and running_var are needed when training=False")
        if training and numel(x) // max(c, 1) <= 1:
            raise ShapeError(f"batch_norm: expected more than 1 value per channel when training, "
                             f"got input of shape {x.shape}")
        y = same_spec(x)
        if training:
            stat = Spec((c,), x.dtype, x.device)
            return y, stat, stat
        return y

    def forward(xp, x, weight, bias, running_mean, running_var, *, training, momentum, eps):
        dims, view = _channel_dims(x), _channel_shape(x)
        if training:
            # the centred input is made once: the variance is read from it (einsum sums the
            # squares without a temporary) and it becomes the output in place
            work = upcast_half(x)
            batch_mean = work.mean(axis=dims)
            y = work - batch_mean.reshape(view)
            batch_var = _channel_dot(xp, y, y) / (x.size // x.shape[1])
            scale = 1.0 / xp.sqrt(batch_var + eps)
            if weight is not None:
                scale = scale * weight
            y *= scale.reshape(view)
            if bias is not None:
                y += bias.reshape(view)
            return y.astype(x.dtype, copy=False), batch_mean, batch_var
        mean_, var_ = running_mean, running_var
        scale = 1.0 / xp.sqrt(var_ + eps)
        if weight is not None:
            scale = scale * weight
        shift = -mean_ * scale
        if bias is not None:
            shift = shift + bias
        y = x * scale.reshape(view)
        y += shift.reshape(view)  # in place: one output array, no temporary
        return y.astype(x.dtype, copy=False)

    def vjp(g, out, x, weight, bias, running_mean, running_var, *, training, momentum, eps):
        if training and not is_grad_enabled():
            # one fused op, about half the passes over memory of the composite below; a graph
            # of the gradient (create_graph) needs the composite, whose ops are differentiable
            g, _, _ = g
            _, batch_mean, batch_var = out
            gx, gw, gb = apply(BatchNormBackward, g, x, weight, batch_mean, batch_var, eps=eps)
            return (gx if x.requires_grad else None,
                    gw if weight is not None and weight.requires_grad else None,
                    gb if bias is not None and bias.requires_grad else None, None, None)
        view, dims = _channel_shape(x), _channel_dims(x)
        if training:
            g, _, _ = g  # the statistics carry no gradient
            _, batch_mean, batch_var = out
            rstd = reshape(rsqrt(add(batch_var, eps)), view)
            xhat = mul(sub(x, reshape(batch_mean, view)), rstd)
        else:
            rstd = reshape(rsqrt(add(running_var, eps)), view)
            xhat = mul(sub(x, reshape(running_mean, view)), rstd)
        gx = None
        if x.requires_grad:
            gxhat = mul(g, reshape(weight, view)) if weight is not None else g
            # in inference the statistics are constants: the gradient is only the scale
            gx = _standardize_grad(gxhat, xhat, rstd, dims) if training else mul(gxhat, rstd)
        gw, gb = _affine_grads(g, xhat, weight, bias, dims)
        return gx, gw, gb, None, None  # running statistics are buffers, not differentiated

    def cost(out, x, weight, bias, running_mean, running_var, *, training, momentum, eps):
        # inference: a folded scale and shift (2 per element); training: + mean sum, subtract,
        # square and variance sum for the batch statistics (4 per element)
        return io_cost(out, (x, weight, bias, running_mean, running_var),
                       flops=(6 if training else 2) * numel(x))

    def sbp(out, x, weight, bias, running_mean, running_var, *, training, momentum, eps):
        # channels, with their parameters and statistics; in inference also any other dim. In
        # training not the batch: each rank would normalize with its own batch's statistics
        # (data parallelism without SyncBatchNorm), which is not this op's result
        per_c = tuple(None if t is None else S(0) for t in (weight, bias, running_mean, running_var))
        vec = tuple(None if t is None else B for t in (weight, bias, running_mean, running_var))
        n_out = 3 if training else 1
        sigs = [Signature((S(1),) + per_c, (S(1),) + (S(0),) * (n_out - 1))] if x.shape[1] > 1 else []
        if not training:
            sigs += [Signature((S(d),) + vec, (S(d),)) for d in range(x.ndim) if d != 1 and x.shape[d] > 1]
        return sigs


@register_op("batch_norm_backward")
class BatchNormBackward(Op):
    """The gradients (x, weight, bias) of batch norm in training, in one op, from the batch
    statistics its forward returned. With M elements per channel and rstd = 1/sqrt(var + eps):
    gb = Σg, gw = rstd·Σ g·(x − mean), and
    gx = weight·rstd·(g − gb/M − (x − mean)·rstd·gw/M), evaluated as scale·g + k·(x − mean) + c
    with per-channel scale, k and c. The weight may be None (no affine): scale is rstd.
    """
    backward = True  # dispatched by a vjp

    vjp = None  # a second derivative takes BatchNorm's composite gradient instead

    def shape(g, x, weight, batch_mean, batch_var, *, eps):
        if tuple(g.shape) != tuple(x.shape):
            raise ShapeError(f"batch_norm_backward: gradient {g.shape} does not fit input {x.shape}")
        c = x.shape[1]
        for name, t in (("weight", weight), ("batch_mean", batch_mean), ("batch_var", batch_var)):
            _check_vector("batch_norm_backward", name, t, c, x)
        stat = Spec((c,), x.dtype, x.device)
        return same_spec(x), stat, stat

    def forward(xp, g, x, weight, batch_mean, batch_var, *, eps):
        dims, view = _channel_dims(x), _channel_shape(x)
        count = x.size // x.shape[1]
        work_g = upcast_half(g)
        rstd = 1.0 / xp.sqrt(upcast_half(batch_var) + eps)
        centered = upcast_half(x) - upcast_half(batch_mean).reshape(view)
        sum_g = work_g.sum(axis=dims)
        dot = _channel_dot(xp, centered, work_g)  # Σ g·(x − mean)
        scale = rstd if weight is None else rstd * upcast_half(weight)
        centered *= (-scale * rstd * rstd * dot / count).reshape(view)  # k·(x − mean), in place
        centered += (-scale * sum_g / count).reshape(view)
        gx = work_g * scale.reshape(view)
        gx += centered
        return (gx.astype(x.dtype, copy=False), (dot * rstd).astype(x.dtype, copy=False),
                sum_g.astype(x.dtype, copy=False))

    def cost(out, g, x, weight, batch_mean, batch_var, *, eps):
        # per element: subtract the mean, multiply by g, the two sums, then scale·g, k·(x − mean)
        # and two adds; the per-channel coefficients (a few per channel) are not counted
        return io_cost(out, (g, x, weight, batch_mean, batch_var), flops=8 * numel(x))

    def sbp(out, g, x, weight, batch_mean, batch_var, *, eps):
        # channels only: the gradient needs sums over the whole batch of every channel
        w = None if weight is None else S(0)
        return [Signature((S(1), S(1), w, S(0), S(0)), (S(1), S(0), S(0)))] if x.shape[1] > 1 else []


def _update_running(running, batch_stat, momentum: float, correction: float = 1.0) -> None:
    """running <- (1 − momentum)·running + momentum·correction·batch_stat, with registered ops,
    written into ``running`` in place (``correction`` turns a biased variance unbiased)."""
    new = add(mul(running, 1.0 - momentum), mul(batch_stat, momentum * correction))
    if running.data is not None and new.data is not None:  # meta and traced values hold no data
        running.copy_(new)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5):
    """Normalize each channel (dim 1) of ``input``, then scale by ``weight`` and shift by ``bias``.

    In training the batch statistics normalize and, when given, ``running_mean`` and
    ``running_var`` are updated in place (unbiased variance, weight ``momentum``), as PyTorch does.

    >>> x = rt.tensor([[1.0], [3.0]])
    >>> batch_norm(x, None, None, training=True).tolist()   # doctest: +SKIP
    [[-0.99999...], [0.99999...]]
    """
    out = apply(BatchNorm, input, weight, bias, running_mean, running_var, training=bool(training),
                momentum=float(momentum), eps=float(eps))
    if not training:
        return out
    y, batch_mean, batch_var = out
    if running_mean is not None or running_var is not None:
        count = numel(input) // input.shape[1]
        with no_grad():
            if running_mean is not None:
                _update_running(running_mean, batch_mean, momentum)
            if running_var is not None:
                _update_running(running_var, batch_var, momentum, count / (count - 1))
    return y


# --- layer, group, RMS norm ----------------------------------------------------------------------

def _normalized_dims(op: str, x, normalized_shape: tuple) -> tuple:
    k = len(normalized_shape)
    if k == 0 or x.ndim < k or tuple(x.shape[x.ndim - k:]) != normalized_shape:
        raise ShapeError(f"{op}: normalized_shape {normalized_shape} does not match the last dims "
                         f"of the input {x.shape}")
    return tuple(range(x.ndim - k, x.ndim))


def _check_affine(op: str, x, normalized_shape: tuple, *params) -> None:
    for name, t in zip(("weight", "bias"), params):
        if t is not None and tuple(t.shape) != normalized_shape:
            raise ShapeError(f"{op}: {name} has shape {tuple(t.shape)}, expected {normalized_shape} "
                             f"for input {x.shape}")


def _affine_flops(x, *params) -> int:
    return sum(numel(x) for p in params if p is not None)  # one multiply or add per element each


def _norm_kernels(xp, x, weight, bias):
    """The compiled float32 layer norm (``cpu_kernels/_norm.py``) where it applies, else None."""
    if x.dtype != np.float32 or any(p is not None and p.dtype != np.float32 for p in (weight, bias)):
        return None
    return cpu_kernels.kernel("norm", xp)


def _compiled_layer_norm(kernels, x, weight, bias, columns: int, eps: float):
    """The output in contiguous rows (C order), whatever the input's layout."""
    rows = x.reshape(-1, columns)  # a view where it can be: the kernels read any strides
    by_columns = rows.strides[1] != 4 and rows.strides[0] == 4 and columns > 1
    if not by_columns and rows.strides[1] != 4:
        rows = np.ascontiguousarray(rows)
    mean = np.empty(rows.shape[0], np.float32)
    std = np.empty(rows.shape[0], np.float32)
    (kernels.column_moments if by_columns else kernels.row_moments)(rows, np.float32(eps), mean, std)
    out = np.empty(rows.shape, np.float32)
    absent = np.zeros(0, np.float32)
    kernels.normalize_rows(rows, mean, std, absent if weight is None else weight.reshape(-1),
                           absent if bias is None else bias.reshape(-1), weight is not None, bias is not None, out)
    return out.reshape(x.shape)


@register_op("layer_norm", ptflops="layer_norm")
class LayerNorm(Op):
    """Normalization over the trailing ``normalized_shape`` dims, then an elementwise affine."""

    def shape(x, weight, bias, *, normalized_shape, eps):
        check_float("layer_norm", x)
        _normalized_dims("layer_norm", x, normalized_shape)
        _check_affine("layer_norm", x, normalized_shape, weight, bias)
        return same_spec(x)

    def forward(xp, x, weight, bias, *, normalized_shape, eps):
        kernels = _norm_kernels(xp, x, weight, bias)
        if kernels is not None:  # one pass for the moments and one for the rest, float32
            return _compiled_layer_norm(kernels, x, weight, bias, prod(normalized_shape), eps)
        dims = tuple(range(x.ndim - len(normalized_shape), x.ndim))
        work = upcast_half(x)
        # one new array, every later step in place (a temporary per step was several times slower)
        y = work - work.mean(axis=dims, keepdims=True)
        std = xp.square(y).mean(axis=dims, keepdims=True)
        std += eps
        xp.sqrt(std, out=std)
        y /= std
        if weight is not None:
            y *= weight
        if bias is not None:
            y += bias
        return y.astype(x.dtype, copy=False)

    kernels = {"cuda": cuda_kernels.layer_norm(forward)}

    def vjp(g, out, x, weight, bias, *, normalized_shape, eps):
        dims = tuple(range(x.ndim - len(normalized_shape), x.ndim))
        xhat, rstd = _recompute_stats(x, dims, eps)
        gx = None
        if x.requires_grad:
            gxhat = mul(g, weight) if weight is not None else g
            gx = _standardize_grad(gxhat, xhat, rstd, dims)
        gw, gb = _affine_grads(g, xhat, weight, bias, tuple(range(x.ndim - len(normalized_shape))))
        return gx, gw, gb

    def cost(out, x, weight, bias, *, normalized_shape, eps):
        # mean, subtract, square, variance sum, scale (5 per element) + weight and bias
        return io_cost(out, (x, weight, bias), flops=5 * numel(x) + _affine_flops(x, weight, bias))

    def sbp(out, x, weight, bias, *, normalized_shape, eps):
        return leading(x, x.ndim - len(normalized_shape), (weight, bias))  # rows are independent


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """(x − mean) / sqrt(var + eps) over the last ``len(normalized_shape)`` dims, then affine.

    >>> layer_norm(rt.tensor([[1.0, 3.0]]), (2,)).tolist()   # doctest: +SKIP
    [[-0.99999..., 0.99999...]]
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(int(n) for n in normalized_shape)
    return apply(LayerNorm, input, weight, bias, normalized_shape=shape, eps=float(eps))


@register_op("group_norm", ptflops="affine_norm")
class GroupNorm(Op):
    """Normalization over groups of channels of (N, C, *) input, then a per-channel affine."""

    def shape(x, weight, bias, *, num_groups, eps):
        check_float("group_norm", x)
        if x.ndim < 2:
            raise ShapeError(f"group_norm: expects an input (N, C, ...) with at least 2 dims, got {x.shape}")
        c = x.shape[1]
        if num_groups <= 0 or c % num_groups:
            raise ShapeError(f"group_norm: {c} channels of input {x.shape} cannot be split into "
                             f"{num_groups} groups")
        _check_vector("group_norm", "weight", weight, c, x)
        _check_vector("group_norm", "bias", bias, c, x)
        return same_spec(x)

    def forward(xp, x, weight, bias, *, num_groups, eps):
        n, c = x.shape[0], x.shape[1]
        work = upcast_half(x).reshape(n, num_groups, -1)
        centered = work - work.mean(axis=2, keepdims=True)
        y = (centered / xp.sqrt((centered * centered).mean(axis=2, keepdims=True) + eps)).reshape(x.shape)
        view = (1, c) + (1,) * (x.ndim - 2)
        if weight is not None:
            y = y * weight.reshape(view)
        if bias is not None:
            y = y + bias.reshape(view)
        return y.astype(x.dtype, copy=False)

    def vjp(g, out, x, weight, bias, *, num_groups, eps):
        grouped = (x.shape[0], num_groups, numel(x) // (x.shape[0] * num_groups))
        xhat, rstd = _recompute_stats(reshape(x, grouped), (2,), eps)
        xhat_full = reshape(xhat, x.shape)
        gx = None
        if x.requires_grad:
            gxhat = mul(g, reshape(weight, _channel_shape(x))) if weight is not None else g
            gx = reshape(_standardize_grad(reshape(gxhat, grouped), xhat, rstd, (2,)), x.shape)
        gw, gb = _affine_grads(g, xhat_full, weight, bias, _channel_dims(x))
        return gx, gw, gb

    def cost(out, x, weight, bias, *, num_groups, eps):
        # mean, subtract, square, variance sum, scale (5 per element) + weight and bias
        return io_cost(out, (x, weight, bias), flops=5 * numel(x) + _affine_flops(x, weight, bias))

    def sbp(out, x, weight, bias, *, num_groups, eps):
        return leading(x, 1, (weight, bias))  # samples are independent


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """Normalize each group of ``C / num_groups`` channels of every sample, then affine per channel."""
    return apply(GroupNorm, input, weight, bias, num_groups=int(num_groups), eps=float(eps))


@register_op("rms_norm")
class RMSNorm(Op):
    """x / sqrt(mean(x²) + eps) over the trailing ``normalized_shape`` dims, times ``weight``."""

    def shape(x, weight, *, normalized_shape, eps):
        check_float("rms_norm", x)
        _normalized_dims("rms_norm", x, normalized_shape)
        _check_affine("rms_norm", x, normalized_shape, weight)
        return same_spec(x)

    def forward(xp, x, weight, *, normalized_shape, eps):
        dims = tuple(range(x.ndim - len(normalized_shape), x.ndim))
        work = upcast_half(x)
        y = work / xp.sqrt((work * work).mean(axis=dims, keepdims=True) + eps)
        if weight is not None:
            y = y * weight
        return y.astype(x.dtype, copy=False)

    kernels = {"cuda": cuda_kernels.rms_norm(forward)}

    def vjp(g, out, x, weight, *, normalized_shape, eps):
        dims = tuple(range(x.ndim - len(normalized_shape), x.ndim))
        rstd = rsqrt(add(mean(mul(x, x), dims, keepdim=True), eps))
        xhat = mul(x, rstd)
        gx = None
        if x.requires_grad:
            gxhat = mul(g, weight) if weight is not None else g
            # no mean was subtracted, so only the variance term of the standardize gradient stays
            gx = mul(rstd, sub(gxhat, mul(xhat, mean(mul(gxhat, xhat), dims, keepdim=True))))
        gw, _ = _affine_grads(g, xhat, weight, None, tuple(range(x.ndim - len(normalized_shape))))
        return gx, gw

    def cost(out, x, weight, *, normalized_shape, eps):
        # COUNTING.md prices every norm alike: 5 per element (its kernel does 3: square, sum,
        # scale; the shared row keeps norms comparable across models) + the weight multiply
        return io_cost(out, (x, weight), flops=5 * numel(x) + _affine_flops(x, weight))

    def sbp(out, x, weight, *, normalized_shape, eps):
        return leading(x, x.ndim - len(normalized_shape), (weight,))


def rms_norm(input, normalized_shape, weight=None, eps: float | None = None):
    """x / sqrt(mean(x²) + eps) over the last dims, times ``weight``; ``eps=None`` is the
    machine epsilon of the input's dtype, as in PyTorch."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(int(n) for n in normalized_shape)
    if eps is None:
        eps = float(np.finfo(input.dtype.np).eps) if input.dtype.is_floating_point else 1e-6
    return apply(RMSNorm, input, weight, normalized_shape=shape, eps=float(eps))


# --- instance norm -----------------------------------------------------------------------------

def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5):
    """Normalize each channel of each sample over its spatial dims, then affine per channel.

    With ``use_input_stats`` this is a group norm with one channel per group; when running
    statistics are given they are updated with the batch average of the per-instance statistics
    (as PyTorch). Without it, the running statistics normalize, as a batch norm in inference.
    """
    if input.ndim < 3:
        raise ShapeError(f"instance_norm: expects an input (N, C, *spatial), got {input.shape}")
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, training=False, eps=eps)
    spatial = prod(input.shape[2:])
    if spatial <= 1:
        raise ShapeError(f"instance_norm: expected more than 1 spatial element when training, "
                         f"got input of shape {input.shape}")
    out = group_norm(input, input.shape[1], weight, bias, eps)
    if running_mean is not None or running_var is not None:
        with no_grad():
            dims = tuple(range(2, input.ndim))
            inst_mean = mean(input, dims)
            centered = sub(input, reshape(inst_mean, inst_mean.shape + (1,) * len(dims)))
            inst_var = reduce_sum(mul(centered, centered), dims)  # times 1/(n − 1) below: unbiased
            if running_mean is not None:
                _update_running(running_mean, mean(inst_mean, 0), momentum)
            if running_var is not None:
                _update_running(running_var, mean(inst_var, 0), momentum, 1.0 / (spatial - 1))
    return out
