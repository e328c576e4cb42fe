"""Sliding windows over the spatial dims of (N, C, *spatial) arrays, shared by convolution and
pooling: output sizes, the view one kernel position reads (``windows``), im2col and col2im.

Everything loops over kernel positions (9 for a 3x3 window), never over pixels, and is written
against the array module ``xp`` so the same code runs on numpy and CuPy.

Strided windows: a kernel position of a stride-2 window reads every other element, and strided
copies are slow. When the kernel touches every phase (e.g. 3x3 or 7x7 at stride 2), the padded
input is first split once into its stride phases, ``x[..., u·s + a] -> phase[a][..., u]``, and
each kernel position becomes a stride-1 slice of one phase.
"""

from __future__ import annotations

import itertools
from math import prod

from ._scratch import scratch, scratch_zeros

# im2col buffers larger than this are built a few images at a time: the column buffer of a
# whole batch can be hundreds of MB, and a buffer that fits in cache is faster to fill and read.
CHUNK_BYTES = 16 * 2**20

_LEAD = (slice(None), slice(None))


def out_size(size: int, kernel: int, stride: int, padding: int, dilation: int,
             ceil_mode: bool = False) -> int:
    """Output length of a window sliding over ``size`` (PyTorch's formula for conv and pooling).

    With ``ceil_mode`` a last partial window counts, unless it would start in the right padding.
    """
    room = size + 2 * padding - dilation * (kernel - 1) - 1
    if not ceil_mode:
        return room // stride + 1
    n = -(-room // stride) + 1
    if (n - 1) * stride >= size + padding:
        n -= 1
    return n


def transpose_out_size(size: int, kernel: int, stride: int, padding: int, output_padding: int,
                       dilation: int) -> int:
    """Output length of a transposed convolution (the input length of the matching conv)."""
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


def positions(kernel: tuple):
    """Every kernel position, e.g. (0, 0), (0, 1), ... (2, 2) for a 3x3 window."""
    return itertools.product(*(range(k) for k in kernel))


def _reach(kernel, out, stride, dilation) -> tuple:
    # how far into the padded input the windows read, per dim
    return tuple((o - 1) * s + d * (k - 1) + 1 for k, o, s, d in zip(kernel, out, stride, dilation))


def _phased(kernel, stride, dilation) -> bool:
    # split into phases when the kernel reads every phase of every strided dim
    return any(s > 1 for s in stride) and all(
        len({(i * d) % s for i in range(k)}) == s for k, s, d in zip(kernel, stride, dilation))


def padded(xp, x, before: tuple, total: tuple, value: float = 0.0):
    """(N, C, *total) with ``x`` placed at offset ``before`` and ``value`` around it (what lies
    beyond ``total`` is cut off)."""
    spatial = x.shape[2:]
    if tuple(before) == (0,) * len(before) and tuple(total) == tuple(spatial):
        return x
    shape = x.shape[:2] + tuple(total)
    out = xp.zeros(shape, dtype=x.dtype) if value == 0 else xp.full(shape, value, dtype=x.dtype)
    keep = tuple(min(n, t - b) for n, b, t in zip(spatial, before, total))
    out[_LEAD + tuple(slice(b, b + k) for b, k in zip(before, keep))] = \
        x[_LEAD + tuple(slice(0, k) for k in keep)]
    return out


def _split_phases(xp, xpad, stride):
    """(N, C, *U·s) -> (N, C, *s, *U): element u·s + a of each dim goes to phase a, place u."""
    n, c = xpad.shape[:2]
    units = tuple(t // s for t, s in zip(xpad.shape[2:], stride))
    nd = len(stride)
    split = xpad.reshape((n, c) + tuple(v for u, s in zip(units, stride) for v in (u, s)))
    order = (0, 1) + tuple(3 + 2 * i for i in range(nd)) + tuple(2 + 2 * i for i in range(nd))
    return xp.ascontiguousarray(split.transpose(order)), units


def _merge_phases(xp, phases, stride):
    """The inverse of ``_split_phases``: (N, C, *s, *U) -> (N, C, *U·s)."""
    nd = len(stride)
    n, c = phases.shape[:2]
    units = phases.shape[2 + nd:]
    order = (0, 1) + tuple(v for i in range(nd) for v in (2 + nd + i, 2 + i))
    return phases.transpose(order).reshape((n, c) + tuple(u * s for u, s in zip(units, stride)))


def _phase_key(pos, out, stride, dilation) -> tuple:
    """Where kernel position ``pos`` reads in the phase layout: phase index, then unit slices."""
    phase = tuple((k * d) % s for k, s, d in zip(pos, stride, dilation))
    units = tuple(slice((k * d) // s, (k * d) // s + o) for k, o, s, d in zip(pos, out, stride, dilation))
    return phase + units


def window_slices(pos: tuple, out: tuple, stride: tuple, dilation: tuple) -> tuple:
    """Slices of a padded input that kernel position ``pos`` reads, one per output element."""
    return tuple(slice(k * d, k * d + s * (o - 1) + 1, s)
                 for k, o, s, d in zip(pos, out, stride, dilation))


def windows(xp, x, kernel: tuple, out: tuple, stride: tuple, padding: tuple, dilation: tuple,
            value: float = 0.0):
    """Yield ``(pos, view)`` for every kernel position: the (N, C, *out) elements of ``x``,
    padded with ``value``, that position ``pos`` of each window reads."""
    reach = _reach(kernel, out, stride, dilation)
    if _phased(kernel, stride, dilation):
        total = tuple(-(-r // s) * s for r, s in zip(reach, stride))
        src, _ = _split_phases(xp, padded(xp, x, padding, total, value), stride)
        for pos in positions(kernel):
            yield pos, src[_LEAD + _phase_key(pos, out, stride, dilation)]
    else:
        src = padded(xp, x, padding, reach, value)
        for pos in positions(kernel):
            yield pos, src[_LEAD + window_slices(pos, out, stride, dilation)]


def im2col(xp, x, kernel: tuple, out: tuple, stride: tuple, padding: tuple, dilation: tuple):
    """Columns (N, C, *kernel, *out) of ``x`` (N, C, *spatial): one copy per kernel position,
    so the inner (output-width) axis is contiguous for the matmul that follows."""
    cols = xp.empty(x.shape[:2] + tuple(kernel) + tuple(out), dtype=x.dtype)
    for pos, view in windows(xp, x, kernel, out, stride, padding, dilation):
        cols[_LEAD + pos] = view
    return cols


def scatter_windows(xp, parts, lead: tuple, size: tuple, kernel: tuple, out: tuple, stride: tuple,
                    padding: tuple, dilation: tuple, dtype):
    """The adjoint of ``windows``: add each ``(pos, values)`` pair, values (N, C, *out), into
    the elements that kernel position ``pos`` reads, and return the (N, C, *size) sums.

    The slices of one position never overlap, so ``+=`` is exact. Strided windows accumulate
    into the phase layout (stride-1 slices) and are merged once at the end.
    """
    # windows may reach past the padded input (ceil_mode) or fall short of it (output_padding)
    full = tuple(max(n + 2 * p, r) for n, p, r in zip(size, padding, _reach(kernel, out, stride, dilation)))
    crop = _LEAD + tuple(slice(p, p + n) for p, n in zip(padding, size))
    if _phased(kernel, stride, dilation):
        units = tuple(-(-f // s) for f, s in zip(full, stride))
        acc = xp.zeros(tuple(lead) + tuple(stride) + units, dtype=dtype)
        for pos, values in parts:
            acc[_LEAD + _phase_key(pos, out, stride, dilation)] += values
        return _merge_phases(xp, acc, stride)[crop]
    acc = xp.zeros(tuple(lead) + full, dtype=dtype)
    for pos, values in parts:
        acc[_LEAD + window_slices(pos, out, stride, dilation)] += values
    return acc[crop]


def col2im(xp, cols, size: tuple, stride: tuple, padding: tuple, dilation: tuple):
    """The adjoint of ``im2col``: scatter-add columns (N, C, *kernel, *inp) into (N, C, *size)."""
    nd = len(size)
    kernel, inp = tuple(cols.shape[2:2 + nd]), tuple(cols.shape[2 + nd:])
    parts = ((pos, cols[_LEAD + pos]) for pos in positions(kernel))
    return scatter_windows(xp, parts, cols.shape[:2], size, kernel, inp, stride, padding, dilation, cols.dtype)


class FlatWindows:
    """Every kernel position's elements as one contiguous range of a flat plane.

    The input (N, C, *S), padded and split into the stride phases the kernel reads (as
    ``windows`` does), is stored as ``planes`` (N, C, F, M): one flat plane per phase, with a
    slack row at its end. The element that kernel position ``pos`` reads for output
    (i0, i1, ...) sits at ``off[pos] + i0·R0 + i1·R1 + ...`` of its phase's plane (R the plane's
    row strides), so the elements for all outputs lie in ``plane[off : off + L]`` when the
    outputs are laid out on the *wide grid* (out[0], *U[1:]): rows as long as the plane's,
    whose last U[d] - out[d] entries are not outputs (they read padding or a neighbouring row
    and are cropped away, or are zeros when the grid is an input of a scatter).

    numpy runs a ufunc or a copy over one long contiguous range at full speed; over the
    (N, C, *out) views of ``windows`` it pays a per-row overhead that outweighs rows of a few
    dozen elements (a 56-wide max pool was several times slower; RESULTS.md, "Figures behind
    design choices in the code").

    ``extent`` (per dim, in padded coordinates) is how much of the padded input the planes
    hold: the windows' reach for a gather, at least S + padding for a scatter back to S.
    """

    def __init__(self, kernel: tuple, out: tuple, stride: tuple, padding: tuple, dilation: tuple,
                 size: tuple, extent: tuple | None = None):
        reach = _reach(kernel, out, stride, dilation)
        extent = tuple(reach if extent is None else (max(r, e) for r, e in zip(reach, extent)))
        self.kernel, self.out, self.stride, self.padding, self.size = kernel, out, stride, padding, size
        self.units = tuple(-(-e // s) for e, s in zip(extent, stride))  # U: plane extents
        self.row = row = prod(self.units[1:])
        self.length = out[0] * row  # L
        self.grid = (out[0],) + self.units[1:]
        # element strides of the plane viewed (U0 + 1, *U[1:])
        strides = [prod(self.units[d + 1:]) for d in range(len(out))]
        phases, self.places = [], []
        for pos in positions(kernel):
            phase = tuple((k * d) % s for k, s, d in zip(pos, stride, dilation))
            if phase not in phases:
                phases.append(phase)
            off = sum(((k * d) // s) * r for k, s, d, r in zip(pos, stride, dilation, strides))
            self.places.append((phases.index(phase), off))
        self.phases = phases
        self.plane_size = (self.units[0] + 1) * row

    def ratio(self) -> float:
        """Wide-grid elements per output element (1.0: no row carries extra entries)."""
        return self.row / prod(self.out[1:])

    def _placements(self):
        """Per phase: (slices of x, slices of the phase's plane viewed (U0 + 1, *U[1:]))."""
        for phase in self.phases:
            src, dst = [], []
            for a, n, s, p, u in zip(phase, self.size, self.stride, self.padding, self.units):
                first = (a - p) % s  # the first x index whose padded coordinate is in phase a
                unit = (first + p) // s
                count = max(0, min(-(-(n - first) // s), u - unit))
                src.append(slice(first, first + s * (count - 1) + 1, s) if count else slice(0, 0))
                dst.append(slice(unit, unit + count))
            yield tuple(src), tuple(dst)

    def _plane_view(self, planes, f):
        return planes[:, :, f].reshape(planes.shape[:2] + (self.units[0] + 1,) + self.units[1:])

    def gather(self, xp, x, value: float = 0.0, role: str = "planes"):
        """The planes of ``x`` (N, C, *S), padding and unused edges filled with ``value``
        (a scratch buffer of ``role``: valid until the next request for it)."""
        planes = scratch(xp, role, x.shape[:2] + (len(self.phases), self.plane_size), x.dtype)
        planes.fill(value)
        for f, (src, dst) in enumerate(self._placements()):
            self._plane_view(planes, f)[_LEAD + dst] = x[_LEAD + src]
        return planes

    def view(self, planes, i: int):
        """(N, C, L): what kernel position ``i`` reads, for every point of the wide grid."""
        f, off = self.places[i]
        return planes[:, :, f, off:off + self.length]

    def to_outputs(self, wide):
        """(..., L) on the wide grid -> (..., *out), a view that drops the extra entries."""
        view = wide.reshape(wide.shape[:-1] + self.grid)
        return view[(Ellipsis,) + tuple(slice(0, o) for o in self.out[1:])]

    def from_outputs(self, xp, values, role: str = "grid"):
        """(N, C, *out) -> (N, C, L) on the wide grid, zeros in the extra entries (a scratch
        buffer of ``role``)."""
        wide = scratch_zeros(xp, role, values.shape[:2] + (self.length,), values.dtype)
        self.to_outputs(wide)[...] = values
        return wide

    def zero_planes(self, xp, lead: tuple, dtype, role: str = "planes"):
        """Zero planes for ``lead`` = (N, C), to accumulate into through ``view``."""
        return scratch_zeros(xp, role, tuple(lead) + (len(self.phases), self.plane_size), dtype)

    def scatter(self, xp, planes, dtype):
        """(N, C, *S): the sums accumulated in ``planes`` (zeros, filled through ``view``
        with ``+=``) at the input elements they belong to; padding is dropped."""
        placements = list(self._placements())
        covered = sum(_count(dst) for _, dst in placements)  # phases are disjoint
        shape = planes.shape[:2] + tuple(self.size)
        out = xp.empty(shape, dtype=dtype) if covered == prod(self.size) else xp.zeros(shape, dtype=dtype)
        for f, (src, dst) in enumerate(placements):
            out[_LEAD + src] = self._plane_view(planes, f)[_LEAD + dst]
        return out


def _count(slices: tuple) -> int:
    return prod(sl.stop - sl.start for sl in slices)


def batch_chunks(n: int, bytes_per_item: int) -> list:
    """(start, stop) ranges over a batch of ``n`` so each chunk's buffer stays near CHUNK_BYTES."""
    step = max(1, CHUNK_BYTES // max(bytes_per_item, 1))
    return [(i, min(i + step, n)) for i in range(0, n, step)]
