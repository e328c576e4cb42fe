"""2-d max pooling on the depthwise kernel's wide grid (``_depthwise.py``), and global average
pooling.

Per image and channel, the input plane is split into its stride phases in a buffer whose
padding holds -inf (it never wins); every kernel position then reads one contiguous range of
that buffer, and the running maximum over those ranges is a loop the compiler vectorizes.
numpy's max pool (``ops/pooling.py``) makes a pass over the whole output per kernel position
through memory. A NaN wins, as numpy's ``maximum`` lets it.

A global average pool (the squeeze of squeeze-and-excitation blocks, a classifier's pool) is
one mean per channel plane: numpy's mean pays a per-row overhead that dominates 7x7 to 28x28
planes. Here each plane's sum may be reordered (``fastmath`` reassociation) and so runs in vector
lanes: float32 sums within a few units in the last place of numpy's pairwise ones.
"""

from __future__ import annotations

import numpy as np

from ._depthwise import _crop, _fill_phases, _geometry, whole_steps
from ._jit import jit


@jit
def _max_pool(x, out, sh, sw, ph, pw, offsets, rows, cols):
    n_images, channels = x.shape[0], x.shape[1]
    out_h = out.shape[2]
    count = whole_steps(out_h * cols)
    buf = np.full(sh * sw * rows * cols + count, -np.inf, dtype=x.dtype)  # -inf slack
    acc = np.empty(count, dtype=x.dtype)
    for n in range(n_images):
        for c in range(channels):
            _fill_phases(x[n, c], buf, sh, sw, ph, pw, rows, cols)
            first = buf[offsets[0]:offsets[0] + count]
            for q in range(count):
                acc[q] = first[q]
            for k in range(1, len(offsets)):
                part = buf[offsets[k]:offsets[k] + count]
                for q in range(count):
                    v = part[q]
                    m = acc[q]
                    # a select and a store every time, not a branch around the store: the
                    # compiler then vectorizes the loop
                    acc[q] = v if (v > m or v != v) else m
            _crop(acc, out[n, c], cols)


def max_pool2d(x, out_size, kernel, stride, padding, dilation):
    """The max pool of x (N, C, H, W), float32 or float64, with output size ``out_size``
    (ceil mode's included): each output the maximum of its window's elements inside the input."""
    n, c, h, wd = x.shape
    (sh, sw), (ph, pw) = stride, padding
    out_h, out_w, rows, cols, offsets = _geometry(h, wd, *kernel, tuple(stride), tuple(padding), tuple(dilation),
                                                  tuple(out_size))
    out = np.empty((n, c, out_h, out_w), dtype=x.dtype)
    _max_pool(np.ascontiguousarray(x), out, sh, sw, ph, pw, offsets, rows, cols)
    return out


def _plane_means(x, out):
    """out[i] = the mean of row i of x (planes, elements)."""
    planes, size = x.shape
    count = x.dtype.type(size)
    for i in range(planes):
        total = x.dtype.type(0)
        for j in range(size):
            total += x[i, j]
        out[i] = total / count


plane_means = jit(_plane_means, fastmath={"reassoc"})
