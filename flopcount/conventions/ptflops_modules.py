"""The ``ptflops`` convention's module rules: what ptflops' (and flowflops') hooks count.

All numbers are ptflops "MACs": multiply-accumulates of GEMM-class layers plus one per element
for activations, pools, norms and upsampling (FLOPs are reported as 2 per MAC). Modules are
recognized by exact type, as ptflops does; everything else counts zero in the eager view, so
ops run directly in a ``forward`` (a residual add) are "seen, not counted".
"""

from __future__ import annotations

from math import prod

from ..runtime.registry import Cost
from .base import first_tensor, macs_only, numel, zero_rule


def conv(module, inputs, output) -> Cost:
    # every output position: prod(K)·Cin·(Cout/g) MACs; bias: Cout per output position
    x, out = inputs[0], first_tensor(output)
    active = x.shape[0] * prod(out.shape[2:])
    per_position = prod(module.kernel_size) * module.in_channels * (module.out_channels // module.groups)
    bias = module.out_channels * active if module.bias is not None else 0
    return macs_only(per_position * active + bias)


def conv_transpose(module, inputs, output) -> Cost:
    # the kernel is applied at every INPUT position; the bias over every output element
    x, out = inputs[0], first_tensor(output)
    active = x.shape[0] * prod(x.shape[2:])
    per_position = prod(module.kernel_size) * module.in_channels * (module.out_channels // module.groups)
    bias = x.shape[0] * prod(out.shape[1:]) if module.bias is not None else 0
    return macs_only(per_position * active + bias)


def linear(module, inputs, output) -> Cost:
    # rows·(in·out + out): ptflops counts the bias add as MACs too
    x, out = inputs[0], first_tensor(output)
    rows = prod(x.shape[:-1])
    bias = out.shape[-1] if module.bias is not None else 0
    return macs_only(rows * (x.shape[-1] * out.shape[-1] + bias))


def elementwise_out(module, inputs, output) -> Cost:
    # activations: one per output element
    return macs_only(numel(first_tensor(output)))


def pool(module, inputs, output) -> Cost:
    # pools (max, avg, adaptive) count their input elements once
    return macs_only(numel(inputs[0]))


def norm(module, inputs, output) -> Cost:
    # batch/instance/group norm: one per element, two with an affine transform
    return macs_only(numel(inputs[0]) * (2 if getattr(module, "affine", False) else 1))


def layer_norm(module, inputs, output) -> Cost:
    # ptflops reads `module.affine`, which LayerNorm does not have: one per element
    return macs_only(numel(inputs[0]))


def upsample(module, inputs, output) -> Cost:
    # ptflops counts the elements of output[0], the first sample (numel(out) at batch 1)
    out = first_tensor(output)
    return macs_only(prod(out.shape[1:]) if out.ndim > 1 else 1)


_GATE_EXTRA = {"RNN": 1, "RNNCell": 1, "GRU": 7, "GRUCell": 7, "LSTM": 10, "LSTMCell": 10}


def _gate_macs(module, w_ih, w_hh, bias: bool, bias_sizes: int) -> int:
    # both gate projections (weight sizes), the gate elementwise work (h, 7h or 10h), biases
    extra = _GATE_EXTRA[type(module).__name__] * module.hidden_size
    return prod(w_ih.shape) + prod(w_hh.shape) + extra + (bias_sizes if bias else 0)


def rnn(module, inputs, output) -> Cost:
    # per layer, × batch × sequence (ptflops reads them as input dims 0 and 1 whatever
    # batch_first says), × 2 when bidirectional
    x = inputs[0]
    total = 0
    for layer in range(module.num_layers):
        w_ih, w_hh = getattr(module, f"weight_ih_l{layer}"), getattr(module, f"weight_hh_l{layer}")
        sizes = (getattr(module, f"bias_ih_l{layer}").shape[0] + getattr(module, f"bias_hh_l{layer}").shape[0]
                 if module.bias else 0)
        total += _gate_macs(module, w_ih, w_hh, module.bias, sizes)
    total *= x.shape[0] * (x.shape[1] if x.ndim > 1 else 1)
    return macs_only(total * (2 if module.bidirectional else 1))


def rnn_cell(module, inputs, output) -> Cost:
    # one step of the cell, × batch
    x = inputs[0]
    sizes = module.bias_ih.shape[0] + module.bias_hh.shape[0] if module.bias else 0
    per_sample = _gate_macs(module, module.weight_ih, module.weight_hh, module.bias, sizes)
    return macs_only(per_sample * (x.shape[0] if x.ndim > 1 else 1))


def multihead_attention(module, inputs, output) -> Cost:
    # ptflops' formula: q scaling, the three projections (each as len·dim·dim of its own
    # input's dim), in-projection bias, per head QKᵀ + softmax + AV, output projection with
    # bias; × batch
    q, k, v = inputs[0], inputs[1], inputs[2]
    batched = q.ndim == 3
    batch_first = getattr(module, "batch_first", False) and batched
    batch = (q.shape[0] if batch_first else q.shape[1]) if batched else 1
    len_idx = 1 if batch_first else 0
    qdim, kdim, vdim = q.shape[-1], k.shape[-1], v.shape[-1]
    qlen, klen, vlen = q.shape[len_idx], k.shape[len_idx], v.shape[len_idx]
    heads = module.num_heads
    macs = qlen * qdim
    macs += qlen * qdim * qdim + klen * kdim * kdim + vlen * vdim * vdim
    if module.in_proj_bias is not None:
        macs += (qlen + klen + vlen) * qdim
    macs += heads * (qlen * klen * (qdim // heads) + qlen * klen + qlen * klen * (vdim // heads))
    macs += qlen * vdim * (vdim + 1)
    return macs_only(macs * batch)


MODULE_RULES = {
    "Conv1d": conv, "Conv2d": conv, "Conv3d": conv,
    "ConvTranspose1d": conv_transpose, "ConvTranspose2d": conv_transpose, "ConvTranspose3d": conv_transpose,
    "Linear": linear,
    "ReLU": elementwise_out, "PReLU": elementwise_out, "ELU": elementwise_out, "LeakyReLU": elementwise_out,
    "ReLU6": elementwise_out, "GELU": elementwise_out,
    # ptflops has no SiLU hook: it counts zero there (efficientnet_b0: 401,669,732 MACs)
    "SiLU": zero_rule,
    "MaxPool1d": pool, "MaxPool2d": pool, "MaxPool3d": pool,
    "AvgPool1d": pool, "AvgPool2d": pool, "AvgPool3d": pool,
    "AdaptiveMaxPool1d": pool, "AdaptiveMaxPool2d": pool, "AdaptiveMaxPool3d": pool,
    "AdaptiveAvgPool1d": pool, "AdaptiveAvgPool2d": pool, "AdaptiveAvgPool3d": pool,
    "BatchNorm1d": norm, "BatchNorm2d": norm, "BatchNorm3d": norm,
    "InstanceNorm1d": norm, "InstanceNorm2d": norm, "InstanceNorm3d": norm, "GroupNorm": norm,
    "LayerNorm": layer_norm,
    "Upsample": upsample,
    "RNN": rnn, "GRU": rnn, "LSTM": rnn,
    "RNNCell": rnn_cell, "GRUCell": rnn_cell, "LSTMCell": rnn_cell,
    "MultiheadAttention": multihead_attention,
    # COUNTING.md's zero rows: ptflops leaves them at zero too
    "Embedding": zero_rule, "Dropout": zero_rule, "Dropout1d": zero_rule, "Dropout2d": zero_rule,
    "Dropout3d": zero_rule, "AlphaDropout": zero_rule, "Flatten": zero_rule, "Unflatten": zero_rule,
    "Identity": zero_rule,
}
