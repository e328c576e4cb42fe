"""3x3 stride-1 convolutions by Winograd's F(2x2, 3x3): 16 GEMMs of (Cout, C) by (C, tiles).

The transforms are compiled (``cpu_kernels/_winograd.py``, which says what they compute); the
16 products run through BLAS. Against im2col and one GEMM of (Cout, 9·C) by (9·C, positions),
this does 16/36 of the multiply-adds, and ResNet's 3x3 layers on 56x56 to 14x14 maps take
clearly less time (benchmarks/RESULTS.md, "Figures behind design choices in the code"). It pays
where the GEMMs stay wide: at least ``MIN_TILES`` 2x2 output blocks in the batch and
``MIN_CHANNELS`` input channels (an RGB layer has GEMMs three deep and is slower this way).
Rounding differs from the direct sum, as
in cuDNN's and oneDNN's Winograd kernels, by a few units in the last place of the largest terms.

The counts are not affected: a conv's cost rule prices the convolution, not the algorithm.

Transformed weights of read-only arrays are kept while the array lives (an imported model's
weights are read-only views of the file's bytes, which the runtime never writes: its in-place
methods copy such an array first), as onnxruntime prepacks a conv's weights once; other weights
are transformed on each call.
"""

from __future__ import annotations

import weakref

import numpy as np

from .. import cpu_kernels
from ._scratch import scratch

MIN_TILES = 40
MIN_CHANNELS = 8
# planes of a transformed array whose byte distance is within this of a multiple of 4 KiB
# share cache sets: the transforms, which touch all 16 planes per block, ran several times slower
_ALIAS_BYTES = 512
_ALIAS_SHIFT = 160  # elements added to such a plane distance

_weights: dict = {}  # id(read-only weight) -> (weakref to it, its transform)


def applies(xp, x, w, stride, dilation, groups) -> bool:
    """Whether ``conv_forward`` runs this conv by Winograd's algorithm."""
    if xp is not np or x.ndim != 4 or tuple(w.shape[2:]) != (3, 3) or groups != 1:
        return False
    if tuple(stride) != (1, 1) or tuple(dilation) != (1, 1) or x.dtype not in (np.float32, np.float64):
        return False
    return x.shape[1] >= MIN_CHANNELS and cpu_kernels.kernel("winograd", xp) is not None


def conv2d(x, w, b, padding):
    """y = conv2d(x, w, stride 1, ``padding``) + b for x (N, C, H, W), w (Cout, C, 3, 3), or
    None where the output has too few 2x2 blocks for this to pay (see the module docstring)."""
    n, c, h, wd = x.shape
    cout = w.shape[0]
    ph, pw = padding
    out_h, out_w = h + 2 * ph - 2, wd + 2 * pw - 2
    tiles_h, tiles_w = (out_h + 1) // 2, (out_w + 1) // 2
    tiles = n * tiles_h * tiles_w
    if out_h < 1 or out_w < 1 or tiles < MIN_TILES:
        return None
    compiled = cpu_kernels.kernel("winograd")
    dtype = x.dtype
    u = _transformed(compiled, w, dtype)
    v = _planes(lambda shape: scratch(np, "cols", shape, dtype), c, tiles, dtype.itemsize)
    compiled.input_transform(x, ph, pw, tiles_h, tiles_w, v, dtype.type(0))
    m = _planes(lambda shape: scratch(np, "wide", shape, dtype), cout, tiles, dtype.itemsize)
    np.matmul(u, v, out=m)
    y = np.empty((n, cout, out_h, out_w), dtype)
    bias = np.ascontiguousarray(b, dtype=dtype) if b is not None else np.zeros(0, dtype)
    compiled.output_transform(m, bias, b is not None, tiles_h, tiles_w, y)
    return y


def _planes(allocate, rows: int, cols: int, itemsize: int):
    """A (16, rows, cols) array from ``allocate(shape)``, its planes apart by a distance that
    does not alias in the cache."""
    distance = rows * cols
    offset = distance * itemsize % 4096
    if offset < _ALIAS_BYTES or offset > 4096 - _ALIAS_BYTES:
        distance += _ALIAS_SHIFT
    return allocate((16, distance))[:, :rows * cols].reshape(16, rows, cols)


def _transformed(compiled, w, dtype):
    """U = G w Gᵀ (16, Cout, C), kept while ``w`` lives where ``w`` is read-only."""
    if w.flags.writeable:
        return _transform(compiled, w, dtype)
    key = id(w)
    hit = _weights.get(key)
    if hit is not None and hit[0]() is w and hit[1].dtype == dtype:
        return hit[1]
    u = _transform(compiled, w, dtype)
    _weights[key] = (weakref.ref(w, lambda _, key=key: _weights.pop(key, None)), u)
    return u


def _transform(compiled, w, dtype):
    u = _planes(lambda shape: np.empty(shape, dtype), w.shape[0], w.shape[1], dtype.itemsize)
    compiled.weight_transform(np.ascontiguousarray(w, dtype=dtype), u)
    return u
