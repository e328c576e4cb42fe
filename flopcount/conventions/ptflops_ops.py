"""The ``ptflops`` convention's op rules: what flowflops' graph mode counts, per runtime op.

Each rule returns ptflops "MACs" (FLOPs = 2 per MAC): GEMM-class ops as ptflops' layer hooks
count them (bias adds included), elementwise arithmetic and activations one per output element,
norms as the matching module rule, pooling one per input element, movement and selection zero.
Each op names its rule in its ``ptflops`` property; ops that name none (reductions, cumulative
sums, losses...) have no ptflops rule: they count zero and are listed as unsupported. Ops that
exist only in a backward pass count their own MACs (ptflops has no backward; the GEMM work is
what there is to count).
"""

from __future__ import annotations

from math import prod

from .base import macs_only, numel


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def linear(out, x, weight, bias=None):
    # rows·(in·out + out): the bias add counts as MACs, as in ptflops' Linear hook
    rows = prod(x.shape[:-1])
    return macs_only(rows * (weight.shape[1] * weight.shape[0] + (weight.shape[0] if bias is not None else 0)))


def quantized_linear(out, x, q, scale, bias=None):
    # a Linear layer whose weight is stored quantized: ptflops' Linear formula
    return linear(out, x, q, bias)


def matmul(out, a, b):
    # batch·m·k·n over the broadcast batch
    return macs_only(prod(out.shape[:-2]) * a.shape[-2] * a.shape[-1] * b.shape[-1])


def conv(out, x, weight, bias=None, **attrs):
    # every output element: (Cin/g)·prod(K) MACs, + 1 for the bias (the Conv hook's formula)
    per_output = weight.shape[1] * prod(weight.shape[2:])
    return macs_only(numel(out) * per_output + (numel(out) if bias is not None else 0))


def conv_transpose(out, x, weight, bias=None, **attrs):
    # every input element meets (Cout/g)·prod(K) weights; the bias covers the output
    per_input = weight.shape[1] * prod(weight.shape[2:])
    return macs_only(numel(x) * per_input + (numel(out) if bias is not None else 0))


def attention(out, q, k, v, attn_mask=None, **attrs):
    # MultiheadAttention's per-head part: q scaling, QKᵀ, softmax, AV (projections are linears)
    scores = numel(_first(out)) // v.shape[-1] * k.shape[-2]
    return macs_only(numel(q) + scores * (q.shape[-1] + 1 + v.shape[-1]))


def numel_out(out, *inputs, **attrs):
    # elementwise arithmetic, activations, softmax: one per output element
    return macs_only(numel(_first(out)))


def numel_in(out, x, *inputs, **attrs):
    # pooling: one per input element
    return macs_only(numel(x))


def affine_norm(out, x, weight=None, bias=None, *rest, **attrs):
    # as the BatchNorm, GroupNorm and InstanceNorm hooks: one per element, two with an affine transform
    return macs_only(numel(x) * (2 if weight is not None else 1))


def layer_norm(out, x, weight=None, bias=None, **attrs):
    # as the LayerNorm hook, which never sees the affine flag
    return macs_only(numel(x))


def upsample(out, x, *inputs, **attrs):
    # as the Upsample hook: the elements of the first sample of the output
    o = _first(out)
    return macs_only(prod(o.shape[1:]) if o.ndim > 1 else 1)


def zero(out, *inputs, **attrs):
    # movement, indexing, selection, casts, comparisons: no arithmetic in ptflops' tables
    return macs_only(0)


def own_count(op, field: str):
    """A rule counting ``field`` of the op's own cost: ``macs`` for backward-only ops (the GEMM
    work, nothing for the elementwise rest); ``flops`` for the n-ary sum, maximum, minimum and
    mean (one per element of each binary op of the chain they stand for, ``numel_out`` each)."""

    def rule(out, *inputs, **attrs):
        return macs_only(getattr(op.cost(out, *inputs, **attrs), field))

    return rule


# the rules an op names in its ``ptflops`` property
RULES = {rule.__name__: rule for rule in (linear, quantized_linear, matmul, conv, conv_transpose, attention,
                                           numel_out, numel_in, affine_norm, layer_norm, upsample, zero)}
OWN_COUNTS = {"own_macs": "macs", "own_flops": "flops"}


def op_rule(op):
    """The ptflops rule for a registered op class (the one its ``ptflops`` property names), or
    None when ptflops has none. A gradient op that names none counts its own MACs."""
    name = op.ptflops
    if name is None:
        return own_count(op, "macs") if op.backward else None
    if name in OWN_COUNTS:
        return own_count(op, OWN_COUNTS[name])
    try:
        return RULES[name]
    except KeyError:
        raise ValueError(f"op {op.name!r} names ptflops rule {name!r}; the rules are "
                         f"{sorted(RULES) + sorted(OWN_COUNTS)}") from None
