"""GEMM-class ops: matmul, linear, einsum (bmm and mm are matmul with stricter shapes), and
grouped_mm (a mixture-of-experts layer's expert GEMMs in one op).

Cost (COUNTING.md): MACs = batch·m·k·n for a matmul, rows·in·out for linear, m·k·n for a
grouped_mm of m rows (each row is in one group and meets one k x n matrix); FLOPs = 2·MACs,
plus one add per output element for a bias. Gradients are matmuls too, so a layer's backward
is 2x its forward MACs when both operands need gradients and 1x when only one does.
"""

from __future__ import annotations

__all__ = ["matmul", "mm", "bmm", "linear", "einsum", "grouped_mm"]  # the functional API (nn.functional re-exports it)

import string
from math import prod

from ..cuda import kernels as cuda_kernels
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op
from ..sbp import B, P, S, Signature, pointwise
from . import _packed_gemm
from ._helpers import broadcast_shapes


def blas_operand(xp, x):
    """``x``, copied to C order when it is a stack of matrices that are neither row- nor column-
    contiguous (e.g. attention heads split off a projection by reshape + transpose): numpy's
    matmul runs such stacks in a loop an order of magnitude slower than BLAS, costing far more than the
    copy."""
    if x.ndim <= 2 or x.flags.c_contiguous or xp.swapaxes(x, -1, -2).flags.c_contiguous:
        return x
    return xp.ascontiguousarray(x)


def gemm(xp, a, b):
    """``a @ b`` on arrays. A stack of rows (..., m, k) times one matrix (k, n) runs as a single
    (...·m, k) @ (k, n) GEMM: numpy's matmul would call BLAS once per leading index, with as
    many thread start-ups (several times slower for a transformer's activation on two threads). A model's
    read-only float32 weight may run through the compiled GEMM on a packed copy instead
    (``_packed_gemm``)."""
    if b.ndim == 2:
        out = _packed_gemm.matmul(xp, a, b)
        if out is not None:
            return out
    if a.ndim > 2 and b.ndim == 2:
        rows = a.reshape(prod(a.shape[:-1]), a.shape[-1])  # copies only a non-contiguous stack
        return xp.matmul(rows, b).reshape(a.shape[:-1] + (b.shape[-1],))
    return xp.matmul(blas_operand(xp, a), blas_operand(xp, b))


@register_op("matmul", onnx="MatMul", ptflops="matmul")
class Matmul(Op):
    """(..., m, k) @ (..., k, n) with broadcast batch dims (both operands at least 2-d)."""

    def shape(a, b):
        if a.ndim < 2 or b.ndim < 2:
            raise ShapeError(f"matmul: op needs 2-d or more operands, got {a.shape} and {b.shape}")
        if a.shape[-1] != b.shape[-2]:
            raise ShapeError(f"matmul: shapes {a.shape} and {b.shape} do not match "
                             f"({a.shape[-1]} != {b.shape[-2]})")
        if a.dtype is not b.dtype:
            raise ShapeError(f"matmul: dtypes differ ({a.dtype.name} and {b.dtype.name})")
        batch = broadcast_shapes("matmul", a.shape[:-2], b.shape[:-2])
        return Spec(batch + (a.shape[-2], b.shape[-1]), a.dtype, a.device)

    def forward(xp, a, b):
        return gemm(xp, a, b)

    kernels = {"cuda": cuda_kernels.matmul(forward)}

    def vjp(g, out, a, b):
        from .movement import transpose

        ga = matmul(g, transpose(b, -1, -2)) if a.requires_grad else None
        gb = matmul(transpose(a, -1, -2), g) if b.requires_grad else None
        return ga, gb

    def cost(out, a, b):
        macs = prod(out.shape[:-2]) * a.shape[-2] * a.shape[-1] * b.shape[-1]
        return io_cost(out, (a, b), macs=macs, flops=2 * macs)

    def sbp(out, a, b):
        # batch dims as an elementwise op; rows of a; columns of b; the contracted dim on both
        # gives partial sums; a partial operand times a whole one is a partial product
        nd = out.ndim
        sigs = [sig for sig in pointwise((_batch_spec(a), _batch_spec(b)), out.shape[:-2])]
        sigs += [Signature((S(a.ndim - 2), B), (S(nd - 2),)), Signature((B, S(b.ndim - 1)), (S(nd - 1),)),
                 Signature((S(a.ndim - 1), S(b.ndim - 2)), (P,)),
                 Signature((P, B), (P,)), Signature((B, P), (P,))]
        return sigs


@register_op("grouped_mm")
class GroupedMm(Op):
    """x (m, k) in consecutive groups of rows, group g times w[g] (k, n): ``offsets`` (G,) holds
    where each group ends (cumulative row counts, as ``torch._grouped_mm`` takes them), so an MoE
    layer's tokens sorted by expert meet their expert's weights. Rows after the last end are 0."""

    def shape(x, w, offsets):
        if x.ndim != 2 or w.ndim != 3 or offsets.ndim != 1 or x.shape[1] != w.shape[1] \
                or offsets.shape[0] != w.shape[0]:
            raise ShapeError(f"grouped_mm: needs x (m, k), w (groups, k, n) and offsets (groups,), got {x.shape}, "
                             f"{w.shape} and {offsets.shape}")
        if x.dtype is not w.dtype or offsets.dtype.is_floating_point:
            raise ShapeError(f"grouped_mm: x and w need one dtype and integer offsets, got {x.dtype.name}, "
                             f"{w.dtype.name} and {offsets.dtype.name}")
        return Spec((x.shape[0], w.shape[2]), x.dtype, x.device)

    def forward(xp, x, w, offsets):
        out = xp.zeros((x.shape[0], w.shape[2]), dtype=x.dtype)
        ends = offsets.tolist() if hasattr(offsets, "tolist") else list(offsets)
        start = 0
        for group, end in enumerate(ends):
            if end > start:
                out[start:end] = gemm(xp, x[start:end], w[group])
            start = max(start, end)
        return out

    vjp = None  # the weight's gradient is one product per group (x_gᵀ·g_g): not written yet

    def cost(out, x, w, offsets):
        # every row meets one k x n matrix: m·k·n whatever the grouping (the bound when rows
        # are left after the last group, as a sorted MoE dispatch never leaves them)
        macs = x.shape[0] * x.shape[1] * w.shape[2]
        return io_cost(out, (x, w, offsets), macs=macs, flops=2 * macs)


@register_op("linear", ptflops="linear")
class Linear(Op):
    """x (..., in) @ weight(out, in)ᵀ + bias(out)."""

    def shape(x, weight, bias=None):
        if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
            raise ShapeError(f"linear: input {x.shape} does not fit weight {weight.shape} "
                             f"(expects (..., {weight.shape[-1] if weight.ndim else '?'}))")
        if bias is not None and tuple(bias.shape) != (weight.shape[0],):
            raise ShapeError(f"linear: bias {bias.shape} does not fit weight {weight.shape}")
        if x.dtype is not weight.dtype:
            raise ShapeError(f"linear: input dtype {x.dtype.name} differs from weight dtype {weight.dtype.name}")
        return Spec(x.shape[:-1] + (weight.shape[0],), x.dtype, x.device)

    def forward(xp, x, weight, bias=None):
        out = gemm(xp, x, weight.T)
        if bias is not None:
            out += bias
        return out

    kernels = {"cuda": cuda_kernels.linear(forward)}

    def vjp(g, out, x, weight, bias=None):
        from .movement import reshape, transpose
        from .reduction import sum as reduce_sum

        gx = matmul(g, weight) if x.requires_grad else None
        gw = gb = None
        if weight.requires_grad:
            g2 = reshape(g, (-1, weight.shape[0]))
            x2 = reshape(x, (-1, weight.shape[1]))
            gw = matmul(transpose(g2, 0, 1), x2)
        if bias is not None and bias.requires_grad:
            gb = reduce_sum(g, tuple(range(g.ndim - 1)))
        return gx, gw, gb

    def cost(out, x, weight, bias=None):
        macs = prod(x.shape[:-1]) * weight.shape[1] * weight.shape[0]
        flops = 2 * macs + (numel(out) if bias is not None else 0)
        return io_cost(out, (x, weight, bias), macs=macs, flops=flops)

    def sbp(out, x, weight, bias=None):
        # Megatron's two layers: column parallel (weight split along its output features, and
        # the bias with it), then row parallel (input features split, partial sums out; the
        # bias is added once, so it enters as a partial sum too: B -> P costs nothing).
        b = None if bias is None else B
        sigs = [Signature((B, S(0), None if bias is None else S(0)), (S(x.ndim - 1),)),
                Signature((S(x.ndim - 1), S(1), None if bias is None else P), (P,))]
        sigs += [Signature((S(d), B, b), (S(d),)) for d in range(x.ndim - 1) if x.shape[d] > 1]
        sigs.append(Signature((P, B, None if bias is None else P), (P,)))
        return sigs


def _batch_spec(t):
    """A matmul operand's batch dims (all but the matrix), for the elementwise SBP rule."""
    return Spec(tuple(t.shape[:-2]), t.dtype, t.device)


def _parse_einsum(equation: str, shapes) -> tuple[list, str]:
    """Explicit per-operand subscripts and output, with '...' expanded to letters."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    subs = lhs.split(",")
    if len(subs) != len(shapes):
        raise ShapeError(f"einsum: equation {equation!r} names {len(subs)} operands, got {len(shapes)}")
    used = set(eq) - set(".,->")
    free = [c for c in string.ascii_letters if c not in used]
    ell_rank = max((len(s) - (len(sub) - 3) for sub, s in zip(subs, shapes) if "..." in sub), default=0)
    ell = "".join(free[:ell_rank])
    out_subs = []
    for sub, s in zip(subs, shapes):
        if "..." in sub:
            n = len(s) - (len(sub) - 3)
            sub = sub.replace("...", ell[ell_rank - n:] if n else "")
        if len(sub) != len(s):
            raise ShapeError(f"einsum: subscripts {sub!r} do not fit an operand of shape {tuple(s)}")
        out_subs.append(sub)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        letters = "".join(out_subs)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    return out_subs, out


def _einsum_sizes(op, subs, shapes) -> dict:
    sizes: dict = {}
    for sub, s in zip(subs, shapes):
        for c, n in zip(sub, s):
            if sizes.get(c, n) != n and n != 1 and sizes[c] != 1:
                raise ShapeError(f"{op}: index {c!r} has sizes {sizes[c]} and {n} "
                                 f"(shapes {[tuple(t) for t in shapes]})")
            sizes[c] = max(sizes.get(c, n), n)
    return sizes


@register_op("einsum")
class Einsum(Op):
    """Einstein summation over explicit subscripts (``equation`` is normalized: no '...')."""

    def shape(*xs, equation):
        subs, out = equation.split("->")[0].split(","), equation.split("->")[1]
        sizes = _einsum_sizes("einsum", subs, [t.shape for t in xs])
        return Spec(tuple(sizes[c] for c in out), xs[0].dtype, xs[0].device)

    def forward(xp, *xs, equation):
        return xp.einsum(equation, *xs, optimize=len(xs) > 2)

    def vjp(g, out, *xs, equation):
        from .movement import expand, reshape

        subs, out_sub = equation.split("->")[0].split(","), equation.split("->")[1]
        grads = []
        for i, x in enumerate(xs):
            if not x.requires_grad:
                grads.append(None)
                continue
            others = [s for j, s in enumerate(subs) if j != i]
            available = set(out_sub).union(*others) if others else set(out_sub)
            target = "".join(c for c in dict.fromkeys(subs[i]) if c in available)
            if len(set(subs[i])) != len(subs[i]):
                raise ShapeError(f"einsum: gradient of repeated subscripts {subs[i]!r} is not supported")
            gi = einsum_normalized(f"{','.join([out_sub] + others)}->{target}", g, *[xs[j] for j in range(len(xs)) if j != i])
            if target != subs[i]:  # letters summed away from this operand alone: broadcast back
                gi = reshape(gi, tuple(gi.shape[target.index(c)] if c in target else 1 for c in subs[i]))
                gi = expand(gi, x.shape)
            grads.append(gi)
        return tuple(grads)

    def cost(out, *xs, equation):
        subs = equation.split("->")[0].split(",")
        sizes = _einsum_sizes("einsum", subs, [t.shape for t in xs])
        if len(xs) == 1:  # a permutation or a reduction of one operand
            reduced = numel(xs[0]) if set(subs[0]) - set(equation.split("->")[1]) else 0
            return io_cost(out, xs, flops=reduced)
        # the straightforward loop nest: one multiply-accumulate per point of the index space
        # (for three or more operands a contraction order does fewer; we count the plain loop)
        macs = prod(sizes.values())
        return io_cost(out, xs, macs=macs, flops=2 * macs)

    def sbp(out, *xs, equation):
        # any index letter splits on every operand that has it; one summed away gives partial
        # sums; the result is linear in each operand
        subs, out_sub = equation.split("->")[0].split(","), equation.split("->")[1]
        sizes = _einsum_sizes("einsum", subs, [t.shape for t in xs])
        sigs = []
        for c, n in sizes.items():
            if n <= 1 or any(c in sub and t.shape[sub.index(c)] != n for sub, t in zip(subs, xs)):
                continue
            ins = tuple(S(sub.index(c)) if c in sub else B for sub in subs)
            sigs.append(Signature(ins, (S(out_sub.index(c)) if c in out_sub else P,)))
        sigs += [Signature(tuple(P if j == i else B for j in range(len(xs))), (P,)) for i in range(len(xs))]
        return sigs


def einsum_normalized(equation: str, *xs):
    return apply(Einsum, *xs, equation=equation)


# --- functional API ----------------------------------------------------------------------------

def matmul(a, b):
    """``a @ b`` with NumPy's rules for 1-d operands and broadcast batch dims."""
    from .movement import reshape

    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: both arguments need at least 1 dim, got {a.shape} and {b.shape}")
    a2 = reshape(a, (1, a.shape[0])) if a.ndim == 1 else a
    b2 = reshape(b, (b.shape[0], 1)) if b.ndim == 1 else b
    out = apply(Matmul, a2, b2)
    if a.ndim == 1 or b.ndim == 1:
        shape = out.shape[:-2] + (() if a.ndim == 1 else (out.shape[-2],)) + (() if b.ndim == 1 else (out.shape[-1],))
        out = reshape(out, shape)
    return out


def mm(a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise ShapeError(f"mm: expects two 2-d tensors, got {a.shape} and {b.shape}")
    return apply(Matmul, a, b)


def bmm(a, b):
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise ShapeError(f"bmm: expects two 3-d tensors with the same batch, got {a.shape} and {b.shape}")
    return apply(Matmul, a, b)


def linear(x, weight, bias=None):
    """``x @ weight.T + bias`` (PyTorch's ``F.linear``)."""
    return apply(Linear, x, weight, bias)


def einsum(equation: str, *operands):
    """``rt.einsum("bij,bjk->bik", a, b)``; '...' and implicit outputs follow NumPy."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    subs, out = _parse_einsum(equation, [t.shape for t in operands])
    return apply(Einsum, *operands, equation=f"{','.join(subs)}->{out}")


def grouped_mm(x, w, offsets):
    """Rows of ``x`` (m, k) in groups ending at ``offsets``, group g times ``w[g]`` (k, n).

    >>> x, w = rt.ones(3, 2), rt.tensor([[[1.0], [1.0]], [[2.0], [2.0]]])
    >>> grouped_mm(x, w, rt.tensor([1, 3])).tolist()
    [[2.0], [4.0], [4.0]]
    """
    return apply(GroupedMm, x, w, offsets)
