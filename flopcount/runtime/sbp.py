"""SBP: how one mesh axis holds a value of the global (logical) graph, as in OneFlow's global view.

* ``S(d)`` (Split): each rank of the axis holds one contiguous slice of dim ``d``; concatenated in
  rank order they give the global value. ``S(d, blocks=k)`` views dim ``d`` as ``k`` equal blocks
  and gives each rank its slice of every block: the layout Megatron uses for a fused projection
  (q, k and v side by side in one output: every rank holds its heads of each).
* ``B`` (Broadcast): every rank holds the whole value.
* ``P`` (Partial sum): every rank holds a value of the global shape; their sum is the global value.

An op's SBP rule (``Op.sbp``, beside its shape, kernel, gradient and cost rules) lists the
*signatures* it accepts on one mesh axis: an SBP for each input and the SBPs of the outputs that
follow. Every deterministic op also accepts "all inputs B, all outputs B" (each rank computes
the whole op), which the sharding pass adds itself, so an op without a rule is still correct,
just not split. A signature need not mention divisibility: the pass drops those whose split
dims do not divide by the axis size.

    >>> from flopcount.runtime.sbp import S, B, P, Signature
    >>> Signature((S(0), B), (S(0),))     # a matmul with its rows split: the output rows split
    Signature(S(0), B -> S(0))
    >>> S(2, blocks=3)
    S(2, blocks=3)
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod


class SBP:
    """Base of the three kinds; instances are immutable and compare by value."""

    __slots__ = ()


@dataclass(frozen=True)
class Split(SBP):
    dim: int
    blocks: int = 1

    def __repr__(self) -> str:
        return f"S({self.dim})" if self.blocks == 1 else f"S({self.dim}, blocks={self.blocks})"


class _Broadcast(SBP):
    def __repr__(self) -> str:
        return "B"

    def __reduce__(self):
        return "B"


class _Partial(SBP):
    def __repr__(self) -> str:
        return "P"

    def __reduce__(self):
        return "P"


B = _Broadcast()
P = _Partial()


def S(dim: int, blocks: int = 1) -> Split:
    """Split along ``dim`` (non-negative), optionally block-wise (see the module docstring)."""
    return Split(dim, blocks)


@dataclass(frozen=True)
class Signature:
    """One valid way to run an op on a mesh axis: an SBP per input (None for an absent input)
    and the SBP of each output."""

    inputs: tuple
    outputs: tuple
    # True when each rank must hold one contiguous slice (its kernel finds its place from its
    # rank, as a vocabulary-parallel embedding does): no block-wise variant of it holds
    contiguous: bool = False

    def __repr__(self) -> str:
        ins = ", ".join("-" if s is None else repr(s) for s in self.inputs)
        outs = ", ".join(repr(s) for s in self.outputs)
        return f"Signature({ins} -> {outs})"


def replicated(inputs, n_outputs: int) -> Signature:
    """Every present input B, every output B: what any deterministic op accepts."""
    return Signature(tuple(None if t is None else B for t in inputs), (B,) * n_outputs)


# --- helpers the op rules share ----------------------------------------------------------------

def divides(shape: tuple, sbp: SBP, n: int) -> bool:
    """Whether ``sbp`` splits ``shape`` evenly over ``n`` ranks (B and P always do)."""
    if not isinstance(sbp, Split):
        return True
    return sbp.dim < len(shape) and shape[sbp.dim] % (n * sbp.blocks) == 0


def pointwise(inputs, out_shape: tuple, n_outputs: int = 1, partial: tuple = ()) -> list:
    """Signatures of a broadcasting elementwise op: for each output dim, the inputs that carry
    it (not broadcast there) split along it and the others B. ``partial`` lists the input
    patterns that may be Partial, as tuples of booleans (True: that input P, the rest B; for
    add, (True, True): a sum of partial sums is a partial sum)."""
    out_nd = len(out_shape)
    sigs = []
    for d in range(out_nd):
        per_input = []
        carried = False
        for t in inputs:
            if t is None:
                per_input.append(None)
                continue
            k = d - (out_nd - len(t.shape))
            if k >= 0 and t.shape[k] == out_shape[d] and (t.shape[k] != 1 or out_shape[d] == 1):
                per_input.append(S(k))
                carried = True
            else:
                per_input.append(B)
        if carried and out_shape[d] > 1:
            sigs.append(Signature(tuple(per_input), (S(d),) * n_outputs))
    for pattern in partial:
        per_input = tuple(None if t is None else (P if is_p else B) for t, is_p in zip(inputs, pattern))
        sigs.append(Signature(per_input, (P,) * n_outputs))
    return sigs


def unary(x, linear: bool = False, keep_dims: tuple | None = None, n_outputs: int = 1) -> list:
    """An op applied element by element (or along ``keep_dims`` left whole, e.g. a softmax's
    dim): split along any other dim; P passes through when the op is linear."""
    whole = set(keep_dims or ())
    sigs = [Signature((S(d),), (S(d),) * n_outputs) for d in range(len(x.shape))
            if d not in whole and x.shape[d] > 1]
    if linear:
        sigs.append(Signature((P,), (P,) * n_outputs))
    return sigs


def leading(x, n_dims: int, others: tuple = (), n_outputs: int = 1) -> list:
    """Split along any of the first ``n_dims`` dims of ``x`` (the rows a norm or a per-row op
    treats independently); ``others`` are the op's other inputs, B (weights, biases)."""
    rest = tuple(None if t is None else B for t in others)
    return [Signature((S(d),) + rest, (S(d),) * n_outputs) for d in range(n_dims) if x.shape[d] > 1]


def local_shape(shape: tuple, sbp: SBP, n: int) -> tuple:
    """The shape a rank holds of a value of global ``shape`` under ``sbp`` on ``n`` ranks."""
    if not isinstance(sbp, Split):
        return tuple(shape)
    return tuple(s // n if d == sbp.dim else s for d, s in enumerate(shape))


def slice_of(size: int, sbp: SBP, n: int, index: int) -> list:
    """The positions along a dim of ``size`` that rank ``index`` holds, as (start, stop) runs."""
    if not isinstance(sbp, Split):
        return [(0, size)]
    block = size // sbp.blocks
    shard = block // n
    return [(b * block + index * shard, b * block + (index + 1) * shard) for b in range(sbp.blocks)]


def reshape_groups(src: tuple, dst: tuple) -> list:
    """Pairs (input dims, output dims) of a reshape whose sizes multiply to the same number:
    the runs of dims a reshape merges or splits. Dims of size 1 join their neighbours."""
    if 0 in src or 0 in dst:
        return []
    groups, i, j = [], 0, 0
    while i < len(src) and j < len(dst):
        i0, j0 = i, j
        a, b = src[i], dst[j]
        i, j = i + 1, j + 1
        while a != b:
            if a < b:
                a, i = a * src[i], i + 1
            else:
                b, j = b * dst[j], j + 1
        groups.append((range(i0, i), range(j0, j)))
    return groups


def reshape_sbp(sbp: SBP, src: tuple, dst: tuple, n: int):
    """The SBP of a reshape's result (``src`` -> ``dst``) when its input is ``sbp``, or None
    when no SBP of the result holds the same elements on each rank. Called with the shapes
    swapped it answers the other way (the input SBP a wanted result needs).

    A split of dim d within a merged run of dims is a split of the flattened run in
    ``prod(run dims before d) * blocks`` blocks: any dim of the result's run that has the same
    block count in flattened terms holds the same elements (e.g. (B, L, H) split along L is
    (B*L, H) split in B blocks along dim 0)."""
    if not isinstance(sbp, Split):
        return sbp
    for ins, outs in reshape_groups(src, dst):
        if sbp.dim not in ins:
            continue
        period = prod(src[ins.start:sbp.dim]) * sbp.blocks
        for j in outs:
            before = prod(dst[outs.start:j])
            if dst[j] > 1 and period % before == 0 and dst[j] % (period // before * n) == 0:
                return Split(j, period // before)
        return None
    return None


def per_channel(inputs, n_outputs: int = 1, linear: bool = False, dims: tuple = (0, 1)) -> list:
    """Ops over (N, C, *spatial) tensors that treat every sample and channel apart (pooling,
    resampling and their gradients): split along the batch or the channels on every input.
    ``linear`` ops (average pooling, resampling) also pass partial sums through."""
    first = next(t for t in inputs if t is not None)
    sigs = [Signature(tuple(None if t is None else S(d) for t in inputs), (S(d),) * n_outputs)
            for d in dims if len(first.shape) > d and first.shape[d] > 1]
    if linear:
        sigs.append(Signature(tuple(None if t is None else P for t in inputs), (P,) * n_outputs))
    return sigs


def linear_per_channel(out, x, **attrs) -> list:
    """The SBP rule of a linear op over one (N, C, *spatial) tensor: average pooling, resampling
    and their gradients."""
    return per_channel((x,), linear=True)
