"""The opset-27 ops of state-space and linear-attention layers: CausalConvWithState (Mamba's
short causal convolution with its carried state) and LinearAttention (the recurrent form of
linear attention: plain, gated, delta-rule and gated delta-rule), written as the runtime's ops:
a grouped ``conv`` for the first, and for the second one step per token (the state's decay and
update elementwise, its delta-rule read and the output read as matmuls), in float32 as ONNX
specifies.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as _dt
from ...dispatch import apply
from ...ops import activations as act
from ...ops import elementwise as ew
from ...ops import linalg, movement
from ...ops.conv import Conv
from ...ops.indexing import getitem
from ._base import constant, converter
from .attention import _heads


@converter("CausalConvWithState")
def causal_conv_with_state(ctx, x, weight, bias=None, past=None):
    """Depthwise conv over the carried state followed by the input; its last k − 1 steps are
    the new state."""
    batch, channels, _ = x.shape
    k = weight.shape[2]
    if past is None:
        past = constant(np.zeros((batch, channels, k - 1), dtype=x.dtype.np))
    padded = movement.cat([past, x], 2)
    y = apply(Conv, padded, weight, bias, stride=(1,), padding=(0,), dilation=(1,), groups=channels)
    activation = ctx.attr("activation", "none")
    if activation in ("silu", "swish"):
        y = ew.cast(act.silu(ew.cast(y, _dt.float32)), x.dtype)
    elif activation != "none":
        raise ctx.unsupported(f"activation {activation!r} is not one of none, silu, swish")
    return y, movement.narrow(padded, 2, padded.shape[2] - (k - 1), k - 1)


def _per_head(t, heads: int, size: int):
    """A decay or beta (B, T, H·size or H or 1) as (B, H, T, size)."""
    b, steps, last = t.shape
    width = last // heads if last != 1 else 1
    y = movement.reshape(ew.cast(t, _dt.float32), (b, steps, last // width, width))
    return movement.permute(y, (0, 2, 1, 3))


@converter("LinearAttention")
def linear_attention(ctx, q, k, v, past=None, decay=None, beta=None):
    rule = ctx.attr("update_rule", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ctx.unsupported(f"update_rule {rule!r} is not one of linear, gated, delta, gated_delta")
    hq, hkv = int(ctx.attr("q_num_heads")), int(ctx.attr("kv_num_heads"))
    # (B, T, H·D) -> (B, H, T, D) in float32
    q4, k4, v4 = (ew.cast(_heads(x, n), _dt.float32) for x, n in ((q, hq), (k, hkv), (v, hkv)))
    b, _, steps, dk = q4.shape
    dv = v4.shape[-1]
    group = hq // hkv
    gates = None if decay is None else ew.exp(_per_head(decay, hkv, dk))        # (B, Hkv, T, 1 or dk)
    betas = None if beta is None else _per_head(beta, beta.shape[-1], 1)       # (B, 1 or Hkv, T, 1)
    state_dtype = q.dtype if past is None else past.dtype
    state = (constant(np.zeros((b, hkv, dk, dv), np.float32)) if past is None else ew.cast(past, _dt.float32))
    scale = ctx.attr("scale")
    scale = 1.0 / math.sqrt(dk) if not scale else float(scale)
    outputs = []
    for t in range(steps):
        k_t = getitem(k4, (slice(None), slice(None), slice(t, t + 1)))        # (B, H, 1, dk)
        v_t = getitem(v4, (slice(None), slice(None), slice(t, t + 1)))        # (B, H, 1, dv)
        if gates is not None and rule in ("gated", "gated_delta"):
            g = getitem(gates, (slice(None), slice(None), t))                # (B, H, 1 or dk)
            state = ew.mul(state, movement.unsqueeze(g, -1))
        if betas is not None and rule in ("delta", "gated_delta"):
            retrieved = linalg.matmul(k_t, state)                            # (B, H, 1, dv)
            v_t = ew.mul(getitem(betas, (slice(None), slice(None), slice(t, t + 1))), ew.sub(v_t, retrieved))
        state = ew.add(state, ew.mul(movement.transpose(k_t, -1, -2), v_t))  # the outer product k vᵀ
        read = state
        if group > 1:
            wide = movement.expand(movement.unsqueeze(state, 2), (b, hkv, group, dk, dv))
            read = movement.reshape(wide, (b, hq, dk, dv))
        q_t = getitem(q4, (slice(None), slice(None), slice(t, t + 1)))        # (B, Hq, 1, dk)
        outputs.append(ew.mul(linalg.matmul(q_t, read), scale))
    y = movement.cat(outputs, 2)                                             # (B, Hq, T, dv)
    y = movement.reshape(movement.contiguous(movement.permute(y, (0, 2, 1, 3))), (b, steps, hq * dv))
    return ew.cast(y, q.dtype), ew.cast(state, state_dtype)
