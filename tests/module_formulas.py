"""COUNTING.md's per-layer formulas, one per layer type: the tests' oracle for the op rules.

They are written from the layer's definition, not from the ops its ``forward`` dispatches, so
profiling a model's eager run with them as module rules (:func:`formula_convention`) and
comparing with the sum of its ops (the ``flopcount`` convention, which has no module rules)
checks the op rules against the layers instead of restating them. MACs are the
multiply-accumulates of GEMM-class work; FLOPs are 2 per MAC plus every other arithmetic
operation, with COUNTING.md's per-element prices (sigmoid 4, tanh 1, softmax 5...).
"""

from __future__ import annotations

import inspect
from functools import partial
from math import prod

from flopcount.conventions import Convention, FlopcountConvention
from flopcount.conventions.base import first_tensor, is_constant, numel, with_kwargs, zero_rule
from flopcount.runtime.dtypes import bool_
from flopcount.runtime.registry import Cost


def _gemm(macs: int, extra_flops: int = 0) -> Cost:
    return Cost(macs=macs, flops=2 * macs + extra_flops)


def conv(module, inputs, output) -> Cost:
    # every output element: (Cin/g)·prod(K) MACs; + numel(out) for the bias
    out = first_tensor(output)
    macs = numel(out) * (module.in_channels // module.groups) * prod(module.kernel_size)
    return _gemm(macs, numel(out) if module.bias is not None else 0)


def conv_transpose(module, inputs, output) -> Cost:
    # every input element meets (Cout/g)·prod(K) weights; + numel(out) for the bias
    out = first_tensor(output)
    macs = numel(inputs[0]) * (module.out_channels // module.groups) * prod(module.kernel_size)
    return _gemm(macs, numel(out) if module.bias is not None else 0)


def linear(module, inputs, output) -> Cost:
    # rows·in·out MACs; + numel(out) for the bias
    out = first_tensor(output)
    macs = prod(inputs[0].shape[:-1]) * module.in_features * module.out_features
    return _gemm(macs, numel(out) if module.bias is not None else 0)


def bilinear(module, inputs, output) -> Cost:
    # y_o = Σ_ij x1_i A_oij x2_j as one loop nest: rows·out·in1·in2 MACs; + the bias
    out = first_tensor(output)
    macs = prod(inputs[0].shape[:-1]) * module.out_features * module.in1_features * module.in2_features
    return _gemm(macs, numel(out) if module.bias is not None else 0)


_RUNNING_UPDATE = 6  # per channel: running <- (1 − m)·running + m·stat, for mean and variance


def batch_norm(module, inputs, output) -> Cost:
    # folded scale and shift: 2 per element; batch statistics (training, or no running
    # statistics to use): + mean sum, subtract, square, variance sum = 4 per element; in
    # training the running statistics are updated too (3 per channel and statistic)
    batch_stats = module.training or not module.track_running_stats
    update = _RUNNING_UPDATE * module.num_features if module.training and module.track_running_stats else 0
    return Cost(flops=(6 if batch_stats else 2) * numel(inputs[0]) + update)


def _affine_flops(n: int, *params) -> int:
    return sum(n for p in params if p is not None)


def layer_norm(module, inputs, output) -> Cost:
    # mean, subtract, square, variance sum, scale: 5 per element; + 1 each for weight and bias
    n = numel(inputs[0])
    return Cost(flops=5 * n + _affine_flops(n, module.weight, getattr(module, "bias", None)))


def group_norm(module, inputs, output) -> Cost:
    # as layer norm, per group; the affine transform is per channel
    n = numel(inputs[0])
    return Cost(flops=5 * n + _affine_flops(n, module.weight, module.bias))


def instance_norm(module, inputs, output) -> Cost:
    # with running statistics in eval it is a batch norm; otherwise a group norm per channel.
    # Training with running statistics also takes every instance's mean and variance (sum,
    # subtract, square, sum: 4 per element, a divide per instance), averages both over the
    # batch (N·C adds and C divides each) and updates the running statistics (3 per channel each)
    x = inputs[0]
    n = numel(x)
    if module.track_running_stats and not module.training:
        return Cost(flops=2 * n)
    flops = 5 * n + _affine_flops(n, module.weight, module.bias)
    if module.track_running_stats:
        instances = prod(x.shape[:2]) if x.ndim == int(type(module).__name__[-2]) + 2 else x.shape[0]
        channels = module.num_features
        flops += 4 * n + instances + 2 * (instances + channels) + _RUNNING_UPDATE * channels
    return Cost(flops=flops)


def rms_norm(module, inputs, output) -> Cost:
    # COUNTING.md's norm row: 5 per element, as every norm; + 1 for the weight
    n = numel(inputs[0])
    return Cost(flops=5 * n + _affine_flops(n, module.weight))


def per_element(price: int):
    """Activations: ``price`` FLOPs per output element."""

    def rule(module, inputs, output) -> Cost:
        return Cost(flops=price * numel(first_tensor(output)))

    rule.__doc__ = f"{price} FLOP(s) per output element"
    return rule


def gelu(module, inputs, output) -> Cost:
    # erf form 5 per element, tanh form 8
    return Cost(flops=(8 if module.approximate == "tanh" else 5) * numel(first_tensor(output)))


def elu(module, inputs, output) -> Cost:
    # exp, subtract 1, multiply by alpha, select: 4 per element; SELU scales the result, CELU
    # divides x by alpha first (one more multiply each, when the factor is not 1)
    kind = type(module).__name__
    extra = 1 if kind == "SELU" or (kind == "CELU" and module.alpha != 1) else 0
    return Cost(flops=(4 + extra) * numel(first_tensor(output)))


def softplus(module, inputs, output) -> Cost:
    # exp, add 1, log, select against the threshold: 4 per element; + 2 with beta != 1
    return Cost(flops=(4 + (2 if module.beta != 1 else 0)) * numel(first_tensor(output)))


def _window(module, ndim: int) -> int:
    k = module.kernel_size
    return prod(k) if isinstance(k, (tuple, list)) else k ** ndim


def max_pool(ndim: int):
    def rule(module, inputs, output) -> Cost:
        # prod(K) − 1 comparisons per output element
        return Cost(flops=numel(first_tensor(output)) * (_window(module, ndim) - 1))

    return rule


def avg_pool(ndim: int):
    def rule(module, inputs, output) -> Cost:
        # prod(K) − 1 adds and a divide per output element
        return Cost(flops=numel(first_tensor(output)) * _window(module, ndim))

    return rule


def adaptive_avg_pool(module, inputs, output) -> Cost:
    # every input element added once, one divide per output element
    return Cost(flops=numel(inputs[0]) + numel(first_tensor(output)))


def _adaptive_window_sum(size: int, out: int) -> int:
    # window i covers [floor(i·size/out), ceil((i+1)·size/out)): the sum of their lengths
    return sum(-(-(i + 1) * size // out) - (i * size // out) for i in range(out))


def adaptive_max_pool(module, inputs, output) -> Cost:
    # a window of k elements takes k − 1 comparisons; windows are separable per dim, so all
    # windows hold the product of the per-dim sums of window lengths
    dims = int(type(module).__name__[-2])  # AdaptiveMaxPool2d -> 2
    x, out = inputs[0], first_tensor(output)
    channels = prod(x.shape[:-dims])
    elements = prod(_adaptive_window_sum(n, o) for n, o in zip(x.shape[-dims:], out.shape[-dims:]))
    return Cost(flops=channels * (elements - prod(out.shape[-dims:])))


_UPSAMPLE_PRICE = {"nearest": 0, "nearest-exact": 0, "linear": 3, "bilinear": 7, "trilinear": 15}


def upsample(module, inputs, output) -> Cost:
    # nearest copies; d-linear: a weighted sum of 2^d taps, 2^d multiplies and 2^d − 1 adds
    return Cost(flops=_UPSAMPLE_PRICE.get(module.mode, 0) * numel(first_tensor(output)))


def softmax(module, inputs, output) -> Cost:
    # max, subtract, exp, sum, divide: 5 per element
    return Cost(flops=5 * numel(first_tensor(output)))


def dropout(module, inputs, output) -> Cost:
    # training: compare with p and multiply by the scaled mask (2 per element); eval: nothing
    return Cost(flops=2 * numel(inputs[0]) if module.training and module.p > 0 else 0)


# --- attention --------------------------------------------------------------------------------

def _attention_mask_flops(call: dict, n: int, fused: bool) -> int:
    """FLOPs of MultiheadAttention's masks over n = B·H·Lq·Lk scores: a bool mask becomes an
    additive one (1 per mask element), a padding mask is added to the attention mask (n), the
    mask is added to the scores (n). ``is_causal`` without a padding mask on the fused path
    masks inside the attention op instead (n). Work on masks computed from constants only is
    left out: a graph folds it."""
    padding, mask = call["key_padding_mask"], call["attn_mask"]
    if call["is_causal"] and padding is None and fused:
        return n
    flops = sum(numel(m) for m in (padding, mask)
                if m is not None and m.dtype is bool_ and not is_constant(m))
    if padding is not None and mask is not None and not (is_constant(padding) and is_constant(mask)):
        flops += n
    if padding is not None or mask is not None:
        flops += n
    return flops


@with_kwargs
def multihead_attention(module, inputs, output, kwargs, causal: str = "full") -> Cost:
    """Projections + the two attention contractions + output projection; with ``causal="half"``
    a causal attention on the fused path counts the unmasked half of its contractions, as the
    convention does for the op.

    FLOPs beyond 2·MACs: projection biases; with weights returned (explicit path) the scaling of
    q (numel(q)), softmax (5·n) and averaging over heads (n + numel(avg)); with the fused op
    (``need_weights=False``) the scaling of the scores (n) and softmax (5·n); the masks
    (``attn_mask``, ``key_padding_mask``, ``is_causal``), passed by position or by name.
    """
    call = inspect.signature(type(module).forward).bind(module, *inputs, **kwargs)
    call.apply_defaults()
    q, k, v = call.arguments["query"], call.arguments["key"], call.arguments["value"]
    batched = q.ndim == 3
    batch_first = getattr(module, "batch_first", False) and batched
    lq = q.shape[1] if batch_first else q.shape[0]
    lk = k.shape[1] if batch_first else k.shape[0]
    batch = (q.shape[0] if batch_first else q.shape[1]) if batched else 1
    e, heads = module.embed_dim, module.num_heads
    kdim, vdim = k.shape[-1], v.shape[-1]
    proj_macs = batch * (lq * e * e + lk * e * kdim + lk * e * vdim)
    proj_bias = batch * (lq + 2 * lk) * e if module.in_proj_bias is not None else 0
    n = batch * heads * lq * lk
    attn_macs = n * 2 * (e // heads)
    out_macs = batch * lq * e * e
    out_bias = batch * lq * e if module.out_proj.bias is not None else 0
    weights = output[1] if isinstance(output, (tuple, list)) and len(output) > 1 else None
    attn_flops = _attention_mask_flops(call.arguments, n, fused=weights is None)
    if causal == "half" and call.arguments["is_causal"] and call.arguments["key_padding_mask"] is None \
            and weights is None:
        attn_macs //= 2  # the op then gets is_causal itself, whose masked half is left out
    if weights is None:
        attn_flops += n + 5 * n
    else:
        attn_flops += batch * lq * e + 5 * n
        if weights.ndim in (2, 3):  # averaged over heads
            attn_flops += n + numel(weights)
    if module.training and module.dropout > 0:
        attn_flops += 2 * n  # compare with p, multiply by the scaled mask
    macs = proj_macs + attn_macs + out_macs
    return Cost(macs=macs, flops=2 * macs + proj_bias + out_bias + attn_flops)


# --- recurrent layers -------------------------------------------------------------------------

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4, "RNNCell": 1, "GRUCell": 3, "LSTMCell": 4}


def _cell_flops(kind: str, h: int) -> int:
    """Elementwise FLOPs of one step per sample, after the two gate projections.

    RNN: add the projections (h), tanh or relu (h). LSTM: add (4h), three sigmoids (3·4h),
    tanh of the candidate (h), c = f·c + i·g (3h), h = o·tanh(c) (2h). GRU: r and z: add and
    sigmoid (2·5h), n = tanh(i_n + r·h_n) (3h), h = n + z·(h − n) (3h).
    """
    if kind.startswith("RNN"):
        return 2 * h
    if kind.startswith("LSTM"):
        return 4 * h + 12 * h + h + 3 * h + 2 * h
    return 10 * h + 3 * h + 3 * h


def _sequence_shape(module, x) -> tuple:
    """(steps, batch) of an RNN input, batched or not."""
    if x.ndim == 2:
        return x.shape[0], 1
    return (x.shape[1], x.shape[0]) if module.batch_first else (x.shape[0], x.shape[1])


def recurrent(module, inputs, output) -> Cost:
    # per step, layer and direction: N·(in + h)·G·h MACs; FLOPs: 2·MACs, both biases (2·G·h
    # per sample) and the cell's elementwise work
    kind = type(module).__name__
    steps, batch = _sequence_shape(module, inputs[0])
    h, g = module.hidden_size, _GATES[kind]
    directions = 2 if module.bidirectional else 1
    cell = _cell_flops(kind, h)
    macs = flops = 0
    for layer in range(module.num_layers):
        in_size = module.input_size if layer == 0 else h * directions
        layer_macs = steps * batch * (in_size + h) * g * h
        layer_flops = 2 * layer_macs + steps * batch * (cell + (2 * g * h if module.bias else 0))
        macs += directions * layer_macs
        flops += directions * layer_flops
    return Cost(macs=macs, flops=flops)


def recurrent_cell(module, inputs, output) -> Cost:
    # one step: N·(in + h)·G·h MACs; FLOPs as for a layer
    kind = type(module).__name__
    x = inputs[0]
    batch = x.shape[0] if x.ndim == 2 else 1
    h, g = module.hidden_size, _GATES[kind]
    macs = batch * (module.input_size + h) * g * h
    flops = 2 * macs + batch * _cell_flops(kind, h)
    if module.bias:
        flops += batch * 2 * g * h
    return Cost(macs=macs, flops=flops)


MODULE_RULES = {
    "Conv1d": conv, "Conv2d": conv, "Conv3d": conv,
    "ConvTranspose1d": conv_transpose, "ConvTranspose2d": conv_transpose, "ConvTranspose3d": conv_transpose,
    "Linear": linear, "Bilinear": bilinear,
    "BatchNorm1d": batch_norm, "BatchNorm2d": batch_norm, "BatchNorm3d": batch_norm,
    "LayerNorm": layer_norm, "GroupNorm": group_norm, "RMSNorm": rms_norm,
    "InstanceNorm1d": instance_norm, "InstanceNorm2d": instance_norm, "InstanceNorm3d": instance_norm,
    "ReLU": per_element(1), "ReLU6": per_element(1), "LeakyReLU": per_element(1), "PReLU": per_element(1),
    "Hardtanh": per_element(1), "Tanh": per_element(1), "Sigmoid": per_element(4),
    "SiLU": per_element(5), "Hardsigmoid": per_element(3), "Hardswish": per_element(4),
    "Mish": per_element(5), "GELU": gelu, "ELU": elu, "CELU": elu, "SELU": elu, "Softplus": softplus,
    "Softmax": softmax, "LogSoftmax": softmax,
    "MaxPool1d": max_pool(1), "MaxPool2d": max_pool(2), "MaxPool3d": max_pool(3),
    "AvgPool1d": avg_pool(1), "AvgPool2d": avg_pool(2), "AvgPool3d": avg_pool(3),
    "AdaptiveAvgPool1d": adaptive_avg_pool, "AdaptiveAvgPool2d": adaptive_avg_pool,
    "AdaptiveAvgPool3d": adaptive_avg_pool, "AdaptiveMaxPool1d": adaptive_max_pool,
    "AdaptiveMaxPool2d": adaptive_max_pool, "AdaptiveMaxPool3d": adaptive_max_pool,
    "Upsample": upsample, "UpsamplingNearest2d": upsample, "UpsamplingBilinear2d": upsample,
    "Dropout": dropout, "Dropout1d": dropout, "Dropout2d": dropout, "Dropout3d": dropout,
    "Embedding": zero_rule, "Flatten": zero_rule, "Unflatten": zero_rule, "Identity": zero_rule,
    "MultiheadAttention": multihead_attention,
    "RNN": recurrent, "LSTM": recurrent, "GRU": recurrent,
    "RNNCell": recurrent_cell, "LSTMCell": recurrent_cell, "GRUCell": recurrent_cell,
}


def causal_half_rules() -> dict:
    """MODULE_RULES for ``FlopcountConvention(causal="half")``."""
    return {**MODULE_RULES, "MultiheadAttention": with_kwargs(partial(multihead_attention, causal="half"))}


class FormulaConvention(FlopcountConvention):
    """The ``flopcount`` convention with these formulas as its module rules: a module with a
    formula costs what the formula says (its children covered), every other op its op rule."""

    def __init__(self, causal: str = "full"):
        super().__init__(causal)
        Convention.__init__(self, MODULE_RULES if causal == "full" else causal_half_rules())


def formula_convention(causal: str = "full") -> FormulaConvention:
    """The oracle convention (see the module's docstring)."""
    return FormulaConvention(causal)
