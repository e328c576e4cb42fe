"""Scaled dot-product attention through cuDNN's fused attention (the frontend's ``sdpa`` and
``sdpa_backward``), in float16 and bfloat16: causal masking, an additive mask (cuDNN's bias) and
grouped-query heads; no scores tensor exists in memory, as in our flash kernels. Each
``SdpaPass`` is one graph, planned once (``cudnn_frontend.plan``).

The op keeps no forward state, so the backward runs two graphs: the forward in training mode
(which also writes each row's softmax statistics, cuDNN's log-sum-exp, (B, Hq, Lq, 1) float32)
and ``sdpa_backward`` from them. cuDNN takes (B, H, L, D) tensors: leading batch dims fold into
B. What it does not take here returns None and the caller runs its own kernels: other dtypes,
boolean masks (cuDNN's masked rows are not PyTorch's zeros for a fully masked row), masks that
broadcast along the query or key positions, dropout, a mask that needs its own gradient, head
dims that are not multiples of 8 or above 256 (cuDNN's limits; what the GPU's engines refuse
beyond that is found when the graph is planned).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from . import _source, cudnn_frontend as fe

DTYPES = ("float16", "bfloat16")
MAX_HEAD_DIM = 256


@dataclass(frozen=True)
class SdpaPass:
    """One cuDNN attention graph: ``kind`` ("inference": O; "training": O and the statistics;
    "backward": dQ, dK, dV), the (B, H, L, D) dims of q, k and v, the additive mask's (B or 1,
    H or 1, Lq, Lk) dims or None, the softmax scale, causal masking and the dtype's name."""

    kind: str
    q: tuple
    k: tuple
    v: tuple
    bias: tuple | None
    scale: float
    causal: bool
    dtype: str

    @property
    def out(self) -> tuple:
        """O's dims (and dO's): q's with v's head dim."""
        return self.q[:-1] + self.v[-1:]

    @property
    def stats(self) -> tuple:
        """The softmax statistics' dims: one float32 per query row."""
        return self.q[:-1] + (1,)


def _bias_dims(mask_shape, mask_dtype, q_shape, lk: int):
    """(B or 1, H or 1, Lq, Lk) of an additive mask broadcast to the scores, or None (no mask)
    or False (a mask cuDNN does not take here)."""
    if mask_shape is None:
        return None
    if _source.dtype_name(mask_dtype) not in _source.FLOAT_DTYPES or len(mask_shape) > len(q_shape):
        return False
    shape = (1,) * (len(q_shape) - len(mask_shape)) + tuple(mask_shape)
    batch, heads, rows, cols = shape[:-3], shape[-3], shape[-2], shape[-1]
    if (rows, cols) != (q_shape[-2], lk) or heads not in (1, q_shape[-3]):
        return False
    if all(n == 1 for n in batch):
        return (1, heads, rows, cols)
    if batch == tuple(q_shape[:-3]):
        return (prod(batch), heads, rows, cols)
    return False


def attention_pass(kind: str, q_shape, k_shape, v_shape, mask_shape, mask_dtype, scale: float, causal: bool,
                   dtype) -> SdpaPass | None:
    """The cuDNN graph of an attention call, or None when cuDNN does not take it here.

    >>> p = attention_pass("inference", (2, 3, 8, 128, 64), (2, 3, 2, 256, 64), (2, 3, 2, 256, 64),
    ...                    (128, 256), "float16", 0.125, False, "bfloat16")
    >>> p.q, p.k, p.bias
    ((6, 8, 128, 64), (6, 2, 256, 64), (1, 1, 128, 256))
    """
    name = _source.dtype_name(dtype)
    if name not in DTYPES or len(q_shape) < 3 or not len(q_shape) == len(k_shape) == len(v_shape):
        return None
    if not q_shape[:-3] == k_shape[:-3] == v_shape[:-3] or k_shape[:-1] != v_shape[:-1]:
        return None
    hq, lq, d = q_shape[-3:]
    hk, lk, dv = v_shape[-3:]
    if k_shape[-1] != d or hk < 1 or hq % hk or min(lq, lk) < 1:
        return None
    if any(n % 8 or not 8 <= n <= MAX_HEAD_DIM for n in (d, dv)):
        return None
    bias = _bias_dims(mask_shape, mask_dtype, q_shape, lk)
    if bias is False:
        return None
    b = prod(q_shape[:-3])
    return SdpaPass(kind, (b, hq, lq, d), (b, hk, lk, d), (b, hk, lk, dv), bias, float(scale), bool(causal), name)


# --- graphs ----------------------------------------------------------------------------------------

def build(p: SdpaPass, cudnn) -> tuple:
    """(graph, {role: tensor}) of pass ``p`` (roles q, k, v, bias, o, stats, do, dq, dk, dv):
    no device needed."""
    graph = fe.new_graph(cudnn, p.dtype)
    dtype, f32 = fe.data_type(cudnn, p.dtype), cudnn.data_type.FLOAT

    def tensor(name, dims, data_type=dtype):
        return graph.tensor(name=name, dim=list(dims), stride=fe.packed_strides(dims), data_type=data_type)

    def output(t, dims, data_type=dtype):
        t.set_output(True).set_dim(list(dims)).set_stride(fe.packed_strides(dims)).set_data_type(data_type)
        return t

    tensors = {"q": tensor("q", p.q), "k": tensor("k", p.k), "v": tensor("v", p.v)}
    attrs = dict(attn_scale=p.scale, use_causal_mask=p.causal)
    if p.bias is not None:
        tensors["bias"] = attrs["bias"] = tensor("bias", p.bias)
    qkv = dict(q=tensors["q"], k=tensors["k"], v=tensors["v"])
    if p.kind in ("inference", "training"):
        o, stats = graph.sdpa(**qkv, generate_stats=p.kind == "training", **attrs)
        tensors["o"] = output(o, p.out)
        if p.kind == "training":
            tensors["stats"] = output(stats, p.stats, f32)
    else:
        tensors.update(o=tensor("o", p.out), do=tensor("do", p.out), stats=tensor("stats", p.stats, f32))
        dq, dk, dv = graph.sdpa_backward(**qkv, o=tensors["o"], dO=tensors["do"], stats=tensors["stats"], **attrs)
        tensors.update(dq=output(dq, p.q), dk=output(dk, p.k), dv=output(dv, p.v))
    return graph, tensors


def _run(xp, p: SdpaPass | None, inputs: dict, outputs: dict) -> bool:
    """Run pass ``p`` on ``inputs`` into ``outputs`` ({role: array}); False when not taken."""
    if p is None:
        return False
    built = fe.plan(p, lambda cudnn: build(p, cudnn))
    if built is None:
        return False
    fe.execute(xp, built, {**{r: xp.ascontiguousarray(a) for r, a in inputs.items()}, **outputs})
    return True


def _inputs(xp, q, k, v, mask):
    arrays = {"q": q, "k": k, "v": v}
    if mask is not None:
        arrays["bias"] = mask.astype(q.dtype, copy=False)
    return arrays


def forward(xp, q, k, v, mask, scale: float, causal: bool):
    """softmax(scale·QKᵀ + mask, causal)·V by cuDNN, or None."""
    if not fe.available(xp) or not _source.supported(q, k, v):
        return None
    p = attention_pass("inference", q.shape, k.shape, v.shape, None if mask is None else mask.shape,
                       None if mask is None else mask.dtype, scale, causal, q.dtype)
    out = None if p is None else xp.empty(q.shape[:-1] + v.shape[-1:], dtype=q.dtype)
    return out if _run(xp, p, _inputs(xp, q, k, v, mask), {"o": out}) else None


def backward(xp, g, q, k, v, mask, scale: float, causal: bool):
    """(dQ, dK, dV) by cuDNN's training forward and ``sdpa_backward``, or None."""
    if not fe.available(xp) or not _source.supported(g, q, k, v):
        return None
    shapes = (q.shape, k.shape, v.shape, None if mask is None else mask.shape, None if mask is None else mask.dtype,
              scale, causal, q.dtype)
    train, back = attention_pass("training", *shapes), attention_pass("backward", *shapes)
    if train is None or back is None:
        return None
    arrays = _inputs(xp, q, k, v, mask)
    o = xp.empty(q.shape[:-1] + v.shape[-1:], dtype=q.dtype)
    stats = xp.empty(train.stats, dtype=_source.acc_dtype(q.dtype))
    if not _run(xp, train, arrays, {"o": o, "stats": stats}):
        return None
    grads = {name: xp.empty(t.shape, dtype=t.dtype) for name, t in (("dq", q), ("dk", k), ("dv", v))}
    if not _run(xp, back, {**arrays, "o": o, "do": g, "stats": stats}, grads):
        return None
    return grads["dq"], grads["dk"], grads["dv"]
