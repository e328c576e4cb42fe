"""Embedding lookup and one_hot.

Cost: a lookup does no arithmetic; it reads the gathered rows and the ids (not the whole
table) and writes the rows. A table in a block format (GGUF's Q4_K, Q6_K...: ``block_format``)
is read at its bytes per row and its rows come out decoded, in float32 as llama.cpp's get_rows
gives them. Its gradient is a scatter-add into a zero table: one add per
element of the incoming gradient.

SBP: the ids' dims split the output; the table's columns split the output's last dim; the
table's rows (the vocabulary, Megatron's vocabulary-parallel embedding) give partial sums: each
rank looks up the ids its rows hold and gives zeros for the others. That last kernel needs the
rank's first row, the ``offset`` attr the sharding pass sets (None: the table is whole).
"""

from __future__ import annotations

__all__ = ["embedding", "one_hot"]  # the functional API (nn.functional re-exports it)

from .. import dtypes as _dt
from ..cuda import kernels as cuda_kernels
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Cost, Op, Spec, io_cost, nbytes, numel, register_op
from ..sbp import B, P, S, Signature
from .indexing import _scatter_add


def _check_ids(op: str, ids) -> None:
    if ids.dtype._rank != 1:
        raise ShapeError(f"{op}: ids must be an integer tensor, got {ids.dtype.name} of shape {ids.shape}")


@register_op("embedding", ptflops="zero")
class Embedding(Op):
    """Rows of ``weight`` (num_embeddings, embedding_dim) picked by integer ``ids``."""
    computes = False  # moves or selects elements: runs on any dtype's storage

    def shape(weight, ids, *, padding_idx=None, scale_grad_by_freq=False, offset=None, block_format=None):
        if weight.ndim != 2:
            raise ShapeError(f"embedding: weight must be 2-d (num_embeddings, embedding_dim), got {weight.shape}")
        _check_ids("embedding", ids)
        dtype = _dt.float32 if block_format is not None else weight.dtype
        return Spec(tuple(ids.shape) + (weight.shape[1],), dtype, weight.device)

    def forward(xp, weight, ids, *, padding_idx=None, scale_grad_by_freq=False, offset=None, block_format=None):
        if block_format is not None:   # the raw blocks of the picked rows, decoded
            return xp.asarray(_dt.get_dtype(block_format).decoded(weight[ids]))
        if offset is not None:  # one shard of the rows: the ids it does not hold give zeros
            local, held = _shard_ids(xp, ids, offset, weight.shape[0])
            return weight[local] * held[..., None].astype(weight.dtype)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= weight.shape[0]):
            raise IndexError(f"embedding: ids must lie in [0, {weight.shape[0]}), got values in "
                             f"[{int(ids.min())}, {int(ids.max())}]")
        return weight[ids]

    kernels = {"cuda": cuda_kernels.embedding(forward)}

    def vjp(g, out, weight, ids, *, padding_idx=None, scale_grad_by_freq=False, offset=None, block_format=None):
        extra = {} if offset is None else {"offset": offset}
        gw = apply(EmbeddingBackward, g, ids, num_weights=weight.shape[0], padding_idx=padding_idx,
                   scale_grad_by_freq=scale_grad_by_freq, **extra)
        return gw, None

    def cost(out, weight, ids, *, padding_idx=None, scale_grad_by_freq=False, offset=None, block_format=None):
        # a gather: reads the picked rows (at the table's format) and the ids, writes the rows
        rows = weight.dtype.nbytes(numel(out))
        return Cost(bytes_read=rows + nbytes(ids), bytes_written=nbytes(out))

    def sbp(out, weight, ids, *, padding_idx=None, scale_grad_by_freq=False, offset=None, block_format=None):
        sigs = [Signature((S(0), B), (P,), contiguous=True), Signature((S(1), B), (S(out.ndim - 1),))]
        return sigs + [Signature((B, S(d)), (S(d),)) for d in range(ids.ndim) if ids.shape[d] > 1]

    def shard_attrs(attrs, signature, n, index, out, weight, ids):
        if signature.inputs[0] == S(0):
            return {**attrs, "offset": index * (weight.shape[0] // n)}
        return attrs


@register_op("embedding_backward")
class EmbeddingBackward(Op):
    """Scatter-add of the rows' gradient into a zero table; the padding row gets none."""
    backward = True  # dispatched by a vjp

    def shape(g, ids, *, num_weights, padding_idx=None, scale_grad_by_freq=False, offset=None):
        _check_ids("embedding_backward", ids)
        if tuple(g.shape[:-1]) != tuple(ids.shape):
            raise ShapeError(f"embedding_backward: gradient {g.shape} does not fit ids {ids.shape}")
        return Spec((num_weights, g.shape[-1]), g.dtype, g.device)

    def forward(xp, g, ids, *, num_weights, padding_idx=None, scale_grad_by_freq=False, offset=None):
        flat_ids = ids.reshape(-1)
        rows = g.reshape(-1, g.shape[-1])
        if scale_grad_by_freq:  # each row's gradient divided by how often its id occurs
            counts = xp.bincount(flat_ids)
            rows = rows / counts[flat_ids][:, None].astype(g.dtype)
        if offset is not None:  # one shard of the rows: only the ids it holds scatter
            flat_ids, held = _shard_ids(xp, flat_ids, offset, num_weights)
            rows = rows[held]
            flat_ids = flat_ids[held]
            padding_idx = None if padding_idx is None or not 0 <= padding_idx - offset < num_weights \
                else padding_idx - offset
        out = xp.zeros((num_weights, g.shape[-1]), dtype=g.dtype)
        _scatter_add(xp, out, (flat_ids,), rows)
        if padding_idx is not None:
            out[padding_idx] = 0
        return out

    def vjp(gg, out, g, ids, *, num_weights, padding_idx=None, scale_grad_by_freq=False, offset=None):
        if offset is not None:
            raise NotImplementedError("embedding: double backward of one shard of a table is not supported")
        if scale_grad_by_freq:
            raise NotImplementedError("embedding: double backward with scale_grad_by_freq is not supported")
        from .elementwise import ne, where
        from .movement import unsqueeze

        gg_rows = apply(Embedding, gg, ids)
        if padding_idx is not None:
            gg_rows = where(unsqueeze(ne(ids, padding_idx), -1), gg_rows, 0.0)
        return gg_rows, None

    def cost(out, g, ids, *, num_weights, padding_idx=None, scale_grad_by_freq=False, offset=None):
        return io_cost(out, (g, ids), flops=numel(g))  # one add per scattered element

    def sbp(out, g, ids, *, num_weights, padding_idx=None, scale_grad_by_freq=False, offset=None):
        # the lookup's signatures read backwards: split ids give partial tables (a sum over the
        # ids); split columns stay split; a vocabulary shard scatters only the ids it holds
        sigs = [Signature((B, B), (S(0),), contiguous=True), Signature((S(g.ndim - 1), B), (S(1),)),
                Signature((P, B), (P,))]
        if not scale_grad_by_freq:  # the counts would be the shard's, not the whole batch's
            sigs += [Signature((S(d), S(d)), (P,)) for d in range(ids.ndim) if ids.shape[d] > 1]
        return sigs

    def shard_attrs(attrs, signature, n, index, out, g, ids):
        if signature.outputs[0] == S(0):
            rows = out.shape[0] // n
            return {**attrs, "num_weights": rows, "offset": index * rows}
        return attrs


def _shard_ids(xp, ids, offset: int, rows: int):
    """(ids made local to a shard of ``rows`` rows starting at ``offset``, clipped into it; a
    mask of the ids the shard holds)."""
    local = ids - offset
    held = (local >= 0) & (local < rows)
    return xp.where(held, local, 0), held


def embedding(input, weight, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False):
    """Rows of ``weight`` picked by the integer ids ``input``: shape ``input.shape + (dim,)``.

    The row at ``padding_idx`` gets no gradient. ``sparse=True`` still gives a dense gradient
    (the runtime has no sparse tensors); ``max_norm`` (renormalizing rows in place) is not
    supported.

    >>> embedding(rt.tensor([2, 0]), rt.tensor([[1.0], [2.0], [3.0]])).tolist()
    [[3.0], [1.0]]
    """
    if max_norm is not None:
        raise NotImplementedError("embedding: max_norm (renormalizing rows in place) is not supported")
    if padding_idx is not None:
        n = weight.shape[0]
        if not -n <= padding_idx < n:
            raise ShapeError(f"embedding: padding_idx {padding_idx} must be within num_embeddings {n}")
        padding_idx = int(padding_idx) % n
    block = {"block_format": weight.dtype.name} if isinstance(weight.dtype, _dt.BlockDType) else {}
    return apply(Embedding, weight, input, padding_idx=padding_idx,
                 scale_grad_by_freq=bool(scale_grad_by_freq), **block)


def one_hot(tensor, num_classes: int = -1):
    """int64 tensor of shape ``tensor.shape + (num_classes,)`` with a 1 at each id.

    ``num_classes=-1`` takes the largest id + 1, which needs the values (not on meta).

    >>> one_hot(rt.tensor([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    from ..factories import arange
    from .elementwise import cast, eq
    from .movement import unsqueeze

    _check_ids("one_hot", tensor)
    if num_classes < 0:
        if tensor.data is None:
            raise ShapeError(f"one_hot: num_classes must be given for a tensor without data "
                             f"(shape {tensor.shape})")
        num_classes = int(tensor.numpy().max()) + 1 if tensor.numel() else 0
    classes = arange(num_classes, device=tensor.device)
    return cast(eq(unsqueeze(tensor, -1), classes), _dt.int64)
