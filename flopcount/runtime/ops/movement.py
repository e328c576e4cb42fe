"""Movement ops: reshape, permute, expand (views: no FLOPs, no bytes) and the ones that copy
(cat, contiguous, flip, repeat, pad: bytes, no FLOPs). Squeeze, flatten, stack, split and
friends are composites of these.
"""

from __future__ import annotations

__all__ = ["reshape", "permute", "transpose", "swapaxes", "expand", "broadcast_to", "contiguous", "squeeze", "unsqueeze", "flatten", "unflatten", "cat", "concat", "concatenate", "stack", "narrow", "split", "chunk", "unbind", "flip", "roll", "repeat", "pad"]  # the functional API (nn.functional re-exports it)

from math import prod

from ..dispatch import apply
from ..errors import ShapeError
from ..registry import COPY, STRIDED, VIEW, Op, Spec, io_cost, no_cost, register_op
from ..sbp import B, P, S, Signature, Split, local_shape, pointwise, reshape_sbp, unary
from ._helpers import norm_dim, same_spec


def infer_shape(op: str, shape, numel: int, src: tuple) -> tuple:
    """Resolve one ``-1`` in a target shape; a ShapeError when the sizes cannot match."""
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ShapeError(f"{op}: only one dimension can be -1, got {shape}")
    if -1 in shape:
        known = prod(s for s in shape if s != -1)
        if known == 0 or numel % known:
            raise ShapeError(f"{op}: cannot reshape {src} ({numel} elements) into {shape}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if prod(shape) != numel or any(s < 0 for s in shape):
        raise ShapeError(f"{op}: cannot reshape {src} ({numel} elements) into {shape}")
    return shape


def _only_unit_dims_change(a: tuple, b: tuple) -> bool:
    return [d for d in a if d != 1] == [d for d in b if d != 1]


@register_op("reshape", ptflops="zero")
class Reshape(Op):
    computes = False  # moves or selects elements: runs on any dtype's storage
    cost = no_cost  # a view: nothing computed, nothing moved

    def view(x_contiguous, x, out, *, shape):
        if x_contiguous:
            return VIEW
        # numpy copies a reshape of a strided array, unless only size-1 dims come or go
        return STRIDED if _only_unit_dims_change(x.shape, out.shape) else COPY

    def shape(x, *, shape):
        if prod(shape) != prod(x.shape):
            raise ShapeError(f"reshape: cannot reshape {x.shape} into {shape}")
        return Spec(tuple(shape), x.dtype, x.device)

    def forward(xp, x, *, shape):
        return x.reshape(shape)

    def vjp(g, out, x, *, shape):
        return reshape(g, x.shape)

    # SBP: a layout op; a split moves to the dim of the result holding the same elements
    layout = True

    def output_sbp(sbp, n, out, x, *, shape):
        return reshape_sbp(sbp, tuple(x.shape), tuple(out.shape), n)

    def input_sbp(sbp, n, out, x, *, shape):
        return reshape_sbp(sbp, tuple(out.shape), tuple(x.shape), n)

    def shard_attrs(attrs, signature, n, index, out, x):
        return {**attrs, "shape": local_shape(out.shape, signature.outputs[0], n)}


@register_op("permute", ptflops="zero")
class Permute(Op):
    computes = False  # moves or selects elements: runs on any dtype's storage
    cost = no_cost  # a strided view

    def view(x_contiguous, x, out, *, dims):
        return STRIDED

    def shape(x, *, dims):
        if sorted(dims) != list(range(x.ndim)):
            raise ShapeError(f"permute: dims {dims} are not a permutation of {x.ndim} dims (shape {x.shape})")
        return Spec(tuple(x.shape[d] for d in dims), x.dtype, x.device)

    def forward(xp, x, *, dims):
        return x.transpose(dims)

    def vjp(g, out, x, *, dims):
        inverse = [0] * len(dims)
        for i, d in enumerate(dims):
            inverse[d] = i
        return permute(g, tuple(inverse))

    layout = True  # SBP: a split follows its dim to its new place

    def output_sbp(sbp, n, out, x, *, dims):
        return Split(list(dims).index(sbp.dim), sbp.blocks) if isinstance(sbp, Split) else sbp

    def input_sbp(sbp, n, out, x, *, dims):
        return Split(dims[sbp.dim], sbp.blocks) if isinstance(sbp, Split) else sbp


@register_op("expand", ptflops="zero")
class Expand(Op):
    computes = False  # moves or selects elements: runs on any dtype's storage
    cost = no_cost  # a broadcast view: stride 0 along the new dims

    def view(x_contiguous, x, out, *, shape):
        return STRIDED

    def shape(x, *, shape):
        if len(shape) < x.ndim:
            raise ShapeError(f"expand: target {shape} has fewer dims than the input {x.shape}")
        lead = len(shape) - x.ndim
        for i, n in enumerate(x.shape):
            if n != 1 and n != shape[lead + i]:
                raise ShapeError(f"expand: cannot expand {x.shape} to {shape}")
        return Spec(tuple(shape), x.dtype, x.device)

    def forward(xp, x, *, shape):
        return xp.broadcast_to(x, shape)

    def vjp(g, out, x, *, shape):
        return g  # autograd sums it back over the broadcast dims

    # SBP: a split of a real dim stays; a split of a broadcast dim needs only the input whole
    # (B): each rank's expand makes its own slice
    layout = True

    def output_sbp(sbp, n, out, x, *, shape):
        if isinstance(sbp, Split):
            return Split(sbp.dim + len(shape) - x.ndim, sbp.blocks)
        return sbp

    def input_sbp(sbp, n, out, x, *, shape):
        if not isinstance(sbp, Split):
            return sbp
        d = sbp.dim - (len(shape) - x.ndim)
        return Split(d, sbp.blocks) if d >= 0 and x.shape[d] != 1 else B

    def shard_attrs(attrs, signature, n, index, out, x):
        return {**attrs, "shape": local_shape(out.shape, signature.outputs[0], n)}


@register_op("contiguous", onnx="Identity", ptflops="zero")
class Contiguous(Op):
    computes = False  # moves or selects elements: runs on any dtype's storage
    def shape(x, *, force_copy=False):
        return same_spec(x)

    def forward(xp, x, *, force_copy=False):
        return x.copy() if force_copy else xp.ascontiguousarray(x)

    def view(x_contiguous, x, out, *, force_copy=False):
        return VIEW if x_contiguous and not force_copy else COPY  # ascontiguousarray returns x itself

    def vjp(g, out, x, *, force_copy=False):
        return g

    def cost(out, x, *, force_copy=False):
        return io_cost(out, (x,))  # a copy: read once, written once

    def sbp(out, x, *, force_copy=False):
        return unary(x, linear=True)


@register_op("cat", ptflops="zero")
class Cat(Op):
    computes = False  # moves or selects elements: runs on any dtype's storage
    def shape(*xs, dim):
        first = xs[0]
        for t in xs[1:]:
            if t.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != dim):
                shapes = ", ".join(str(tuple(u.shape)) for u in xs)
                raise ShapeError(f"cat: shapes {shapes} differ outside dim {dim}")
            if t.dtype is not first.dtype:
                raise ShapeError(f"cat: dtypes differ ({first.dtype.name} and {t.dtype.name})")
        shape = list(first.shape)
        shape[dim] = sum(t.shape[dim] for t in xs)
        return Spec(tuple(shape), first.dtype, first.device)

    def forward(xp, *xs, dim):
        return xp.concatenate(xs, axis=dim)

    def vjp(g, out, *xs, dim):
        grads, start = [], 0
        for t in xs:
            n = t.shape[dim]
            grads.append(narrow(g, dim, start, n) if t.requires_grad else None)
            start += n
        return tuple(grads)

    def cost(out, *xs, dim):
        return io_cost(out, xs)  # a copy of every input into the output

    def sbp(out, *xs, dim):
        # any dim but the joined one; partial sums join into a partial sum
        sigs = [sig for sig in pointwise(xs, out.shape) if sig.outputs[0].dim != dim]
        return sigs + [Signature((P,) * len(xs), (P,))]


@register_op("flip", ptflops="zero")
class Flip(Op):
    computes = False  # moves or selects elements: runs on any dtype's storage
    def shape(x, *, dims):
        return same_spec(x)

    def forward(xp, x, *, dims):
        return xp.flip(x, axis=dims)

    def vjp(g, out, x, *, dims):
        return flip(g, dims)

    def cost(out, x, *, dims):
        return io_cost(out, (x,))  # PyTorch materializes the flipped copy

    def sbp(out, x, *, dims):
        return unary(x, linear=True, keep_dims=dims)


@register_op("repeat", ptflops="zero")
class Repeat(Op):
    computes = False  # moves or selects elements: runs on any dtype's storage
    def shape(x, *, repeats):
        if len(repeats) < x.ndim:
            raise ShapeError(f"repeat: {len(repeats)} repeat counts for a {x.ndim}-d tensor {x.shape}")
        src = (1,) * (len(repeats) - x.ndim) + tuple(x.shape)
        return Spec(tuple(a * r for a, r in zip(src, repeats)), x.dtype, x.device)

    def forward(xp, x, *, repeats):
        return xp.tile(x, repeats)

    def vjp(g, out, x, *, repeats):
        from .reduction import sum as reduce_sum

        src = (1,) * (len(repeats) - x.ndim) + tuple(x.shape)
        split = []
        for r, n in zip(repeats, src):
            split += [r, n]
        g = reduce_sum(reshape(g, tuple(split)), tuple(range(0, 2 * len(src), 2)))
        return reshape(g, x.shape)

    def cost(out, x, *, repeats):
        return io_cost(out, (x,))

    def sbp(out, x, *, repeats):
        lead = len(repeats) - x.ndim  # a split survives along dims that are not repeated
        return [Signature((S(d),), (S(d + lead),)) for d in range(x.ndim)
                if repeats[d + lead] == 1 and x.shape[d] > 1] + [Signature((P,), (P,))]


@register_op("pad", ptflops="zero")
class Pad(Op):
    """Constant padding. ``pads`` is per dim, first dim first: ((before, after), ...)."""
    computes = False  # moves or selects elements: runs on any dtype's storage

    def shape(x, *, pads, value=0.0):
        if len(pads) != x.ndim:
            raise ShapeError(f"pad: {len(pads)} (before, after) pairs for a {x.ndim}-d tensor {x.shape}")
        shape = tuple(n + a + b for n, (a, b) in zip(x.shape, pads))
        if any(s < 0 for s in shape):
            raise ShapeError(f"pad: padding {pads} makes a negative size from {x.shape}")
        return Spec(shape, x.dtype, x.device)

    def forward(xp, x, *, pads, value=0.0):
        if all(a >= 0 and b >= 0 for a, b in pads):
            return xp.pad(x, pads, mode="constant", constant_values=value)
        # negative padding crops
        crop = tuple(slice(-a if a < 0 else 0, n + b if b < 0 else n) for n, (a, b) in zip(x.shape, pads))
        return xp.pad(x[crop], [(max(a, 0), max(b, 0)) for a, b in pads], mode="constant", constant_values=value)

    def vjp(g, out, x, *, pads, value=0.0):
        return apply(Pad, g, pads=tuple((-a, -b) for a, b in pads), value=0.0)  # crop back

    def cost(out, x, *, pads, value=0.0):
        return io_cost(out, (x,))  # a copy into a larger buffer

    def sbp(out, x, *, pads, value=0.0):
        padded = tuple(d for d, (a, b) in enumerate(pads) if a or b)
        return unary(x, linear=value == 0, keep_dims=padded)


# --- functional API ----------------------------------------------------------------------------

def reshape(x, shape):
    """``x`` with a new shape (one dim may be -1); a view when the data allows."""
    shape = infer_shape("reshape", shape, prod(x.shape), x.shape)
    if shape == x.shape:
        return x
    return apply(Reshape, x, shape=shape)


def permute(x, dims):
    dims = tuple(norm_dim("permute", d, x.ndim) for d in dims)
    if dims == tuple(range(x.ndim)):
        return x
    return apply(Permute, x, dims=dims)


def transpose(x, dim0: int, dim1: int):
    d0, d1 = norm_dim("transpose", dim0, x.ndim), norm_dim("transpose", dim1, x.ndim)
    dims = list(range(x.ndim))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(x, tuple(dims))


swapaxes = transpose


def expand(x, shape):
    """Broadcast ``x`` to ``shape`` without copying (-1 keeps a dim)."""
    shape = tuple(shape)
    lead = len(shape) - x.ndim
    shape = tuple(x.shape[i - lead] if s == -1 else int(s) for i, s in enumerate(shape))
    if shape == x.shape:
        return x
    return apply(Expand, x, shape=shape)


def broadcast_to(x, shape):
    return expand(x, shape)


def contiguous(x, force_copy: bool = False):
    return apply(Contiguous, x, force_copy=force_copy)


def squeeze(x, dim=None):
    if dim is None:
        return reshape(x, tuple(n for n in x.shape if n != 1))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dims = {norm_dim("squeeze", d, x.ndim) for d in dims}
    return reshape(x, tuple(n for i, n in enumerate(x.shape) if not (i in dims and n == 1)))


def unsqueeze(x, dim: int):
    d = norm_dim("unsqueeze", dim, x.ndim + 1)
    return reshape(x, x.shape[:d] + (1,) + x.shape[d:])


def flatten(x, start_dim: int = 0, end_dim: int = -1):
    if x.ndim == 0:
        return reshape(x, (1,))
    s, e = norm_dim("flatten", start_dim, x.ndim), norm_dim("flatten", end_dim, x.ndim)
    return reshape(x, x.shape[:s] + (prod(x.shape[s:e + 1]),) + x.shape[e + 1:])


def unflatten(x, dim: int, sizes):
    d = norm_dim("unflatten", dim, x.ndim)
    sizes = infer_shape("unflatten", sizes, x.shape[d], (x.shape[d],))
    return reshape(x, x.shape[:d] + tuple(sizes) + x.shape[d + 1:])


def cat(tensors, dim: int = 0):
    """Concatenate along an existing dim."""
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("cat: expects a non-empty list of tensors")
    d = norm_dim("cat", dim, tensors[0].ndim)
    if len(tensors) == 1:
        return tensors[0]
    return apply(Cat, *tensors, dim=d)


concat = concatenate = cat


def stack(tensors, dim: int = 0):
    """Join along a new dim."""
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("stack: expects a non-empty list of tensors")
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) != 1:
        raise ShapeError(f"stack: all tensors must have the same shape, got {sorted(shapes)}")
    d = norm_dim("stack", dim, tensors[0].ndim + 1)
    parts = [unsqueeze(t, d) for t in tensors]
    return parts[0] if len(parts) == 1 else apply(Cat, *parts, dim=d)


def narrow(x, dim: int, start: int, length: int):
    from .indexing import slice_dim

    return slice_dim(x, dim, start, start + length, 1)


def split(x, split_size_or_sections, dim: int = 0):
    """Views of consecutive pieces: equal ``split_size`` pieces, or the listed sizes."""
    d = norm_dim("split", dim, x.ndim)
    n = x.shape[d]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size <= 0:
            raise ShapeError(f"split: split_size must be positive, got {size}")
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise ShapeError(f"split: sizes {sizes} do not add up to dim {d} of size {n} (shape {x.shape})")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(x, d, start, s))
        start += s
    return tuple(out)


def chunk(x, chunks: int, dim: int = 0):
    d = norm_dim("chunk", dim, x.ndim)
    size = -(-x.shape[d] // chunks)
    return split(x, max(size, 1), d)


def unbind(x, dim: int = 0):
    d = norm_dim("unbind", dim, x.ndim)
    return tuple(squeeze(p, d) for p in split(x, 1, d))


def flip(x, dims):
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return apply(Flip, x, dims=tuple(norm_dim("flip", d, x.ndim) for d in dims))


def roll(x, shifts, dims=None):
    """Rotate elements along ``dims`` (a cat of two slices per dim)."""
    if dims is None:
        return reshape(roll(flatten(x), shifts, 0), x.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    for s, d in zip(shifts, dims):
        d = norm_dim("roll", d, x.ndim)
        n = x.shape[d]
        s %= n
        if s:
            x = cat([narrow(x, d, n - s, s), narrow(x, d, 0, n - s)], d)
    return x


def repeat(x, repeats):
    return apply(Repeat, x, repeats=tuple(int(r) for r in repeats))


def pad_list(pairs) -> list:
    """``(before, after)`` per dim, first dim first (as files and other frameworks list them),
    as ``pad`` takes them: a flat list from the last dim.

    >>> pad_list([(0, 0), (1, 2), (3, 4)])
    [3, 4, 1, 2, 0, 0]
    """
    return [int(p) for before, after in reversed(list(pairs)) for p in (before, after)]


def pad(x, pad, mode: str = "constant", value: float = 0.0):
    """PyTorch's ``F.pad``: ``pad`` lists (before, after) pairs starting from the last dim.

    Constant padding is one op; reflect, replicate and circular gather indices (``index_select``).
    """
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ShapeError(f"pad: padding {pad} must have an even length of at most 2*{x.ndim}")
    pairs = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        pairs[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if mode == "constant":
        if all(a == 0 and b == 0 for a, b in pairs):
            return x
        return apply(Pad, x, pads=tuple(pairs), value=float(value))
    from .indexing import index_select
    import numpy as np

    for d, (a, b) in enumerate(pairs):
        if a == 0 and b == 0:
            continue
        n = x.shape[d]
        positions = np.arange(-a, n + b)
        if mode == "reflect":
            if a >= n or b >= n:
                raise ShapeError(f"pad: reflect padding ({a}, {b}) must be smaller than dim {d} of size {n}")
            period = 2 * (n - 1)
            positions = np.abs((positions + period) % period)
            positions = np.where(positions >= n, period - positions, positions)
        elif mode == "replicate":
            positions = np.clip(positions, 0, n - 1)
        elif mode == "circular":
            positions = positions % n
        else:
            raise ValueError(f"pad: unknown mode {mode!r} (constant, reflect, replicate, circular)")
        from ..tensor import tensor

        index = tensor(positions.astype(np.int64), device=x.device if x.device.type != "meta" else "meta")
        x = index_select(x, d, index)
    return x
