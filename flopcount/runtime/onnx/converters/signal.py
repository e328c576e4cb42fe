"""Signal processing: DFT, STFT, the Hann, Hamming and Blackman windows and MelWeightMatrix.

The windows and the mel filter bank depend only on sizes and rates, which must be known when
the graph is built: they are constants. DFT is the runtime's ``dft``; STFT frames the signal,
weights each frame by the window and transforms them in one ``dft``.
"""

from __future__ import annotations

import numpy as np

from ...ops import elementwise as ew
from ...ops import movement
from ...ops.indexing import index_select
from ...ops.spectral import dft
from ..elem_types import to_dtype
from ._base import constant, converter


@converter("DFT")
def dft_(ctx, x, length=None, axis=None):
    if ctx.opset >= 20:
        dim = -2 if axis is None else int(ctx.scalar(axis, "input 'axis'"))
    else:
        dim = int(ctx.attr("axis", 1))
    dim = ctx.axis(dim, x.ndim)
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    n = ctx.scalar(length, "input 'dft_length'")
    if n is None:
        n = 2 * (x.shape[dim] - 1) if inverse and onesided else x.shape[dim]
    return dft(x, dim, int(n), inverse, onesided)


@converter("STFT")
def stft(ctx, signal, step, window=None, frame_length=None):
    hop = int(ctx.scalar(step, "input 'frame_step'"))
    size = ctx.scalar(frame_length, "input 'frame_length'")
    size = int(size) if size is not None else (window.shape[0] if window is not None else signal.shape[-2])
    frames = 1 + (signal.shape[-2] - size) // hop
    starts = np.arange(frames) * hop
    index = constant((starts[:, None] + np.arange(size)[None, :]).reshape(-1))
    picked = index_select(signal, 1, index)  # every frame's samples, frame after frame
    framed = movement.reshape(picked, (signal.shape[0], frames, size, signal.shape[-1]))
    if window is not None:
        framed = ew.mul(framed, movement.reshape(ew.cast(window, signal.dtype), (1, 1, size, 1)))
    return dft(framed, 2, size, False, bool(ctx.attr("onesided", 1)))


def _window(ctx, size, formula):
    n = int(ctx.scalar(size, "input 'size'"))
    span = n if ctx.attr("periodic", 1) else n - 1
    dtype = to_dtype(ctx.attr("output_datatype", 1), f"{ctx.where}: attribute 'output_datatype'")
    return constant(formula(np.arange(n, dtype=np.float64), span).astype(dtype.np))


@converter("HannWindow")
def hann_window(ctx, size):
    return _window(ctx, size, lambda i, n: np.sin(i * np.pi / n) ** 2)


@converter("HammingWindow")
def hamming_window(ctx, size):
    return _window(ctx, size, lambda i, n: 25 / 46 - np.cos(i * np.pi * 2 / n) * (1 - 25 / 46))


@converter("BlackmanWindow")
def blackman_window(ctx, size):
    return _window(ctx, size, lambda i, n: 0.42 - 0.5 * np.cos(i * np.pi * 2 / n) + 0.08 * np.cos(i * np.pi * 4 / n))


@converter("MelWeightMatrix")
def mel_weight_matrix(ctx, bins, length, rate, low, high):
    """The triangular mel filters (dft_length // 2 + 1, num_mel_bins), ONNX's formula."""
    n_mel, n_fft = int(ctx.scalar(bins, "input 'num_mel_bins'")), int(ctx.scalar(length, "input 'dft_length'"))
    sample_rate = ctx.scalar(rate, "input 'sample_rate'")
    lower, upper = ctx.scalar(low, "input 'lower_edge_hertz'"), ctx.scalar(high, "input 'upper_edge_hertz'")
    edges = np.arange(0, n_mel + 2)
    low_mel, high_mel = (2595 * np.log1p(f / 700) / np.log(10) for f in (lower, upper))
    mels = edges * ((high_mel - low_mel) / edges.shape[0]) + low_mel
    hertz = 700 * np.expm1(mels / 2595 * np.log(10))
    points = (((n_fft + 1) * hertz) // sample_rate).astype(int)
    out = np.zeros((n_fft // 2 + 1, n_mel))
    for i in range(n_mel):
        left, centre, right = points[i], points[i + 1], points[i + 2]
        if centre == left:
            out[centre, i] = 1
        else:
            for j in range(left, centre + 1):
                out[j, i] = (j - left) / (centre - left)
        for j in range(centre, right):
            out[j, i] = (right - j) / (right - centre)
    dtype = to_dtype(ctx.attr("output_datatype", 1), f"{ctx.where}: attribute 'output_datatype'")
    return constant(out.astype(dtype.np))

