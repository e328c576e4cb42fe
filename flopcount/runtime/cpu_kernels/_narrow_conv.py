"""Dense 2-d convolution of an input with few channels, as a network's stem convolves an RGB
image: float32, CPUs with AVX2 or AVX-512 (``_simd``).

im2col makes a column matrix only a few dozen rows deep (3·k² for RGB) and many columns wide,
copied with the conv's stride, and BLAS runs far from its peak on so thin a product. Here each
input channel is split into its stride phases once per image, as the depthwise kernel does
(``_depthwise._fill_phases``), and every output channel reads them in place: its output is the
bias plus, per kernel position and input channel, a weight times a shifted range of a phase
plane. ``_block`` keeps a block of output rows by four output channels in registers over all
those taps: one load of the input per row and tap serves the four channels.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from . import _simd
from ._depthwise import _fill_phases, _geometry
from ._jit import jit

CHANNELS = 4  # output channels per register block
ROWS = 4 if _simd.LANES == 16 else 2  # output rows per block: 16 sums of 32 AVX-512 registers, 8 of AVX2's 16
MAX_INPUT_CHANNELS = 4  # wider inputs make deep enough columns for the GEMM


@intrinsic
def _block(typingctx, buf, base, cols, offsets, weights, w_offset, biases, channel, out, out_offset, ldo, plane,
           valid_rows, valid_cols, valid_channels):
    """For the block's output channels c < CHANNELS and rows r < ROWS:
    out[out_offset + c·plane + r·ldo + j] = biases[channel + c]
        + Σ_k weights[w_offset + c·taps + k]·buf[base + offsets[k] + r·cols + j]
    for lanes j < LANES (taps = len(offsets)), each sum in registers, in the order of k, one
    rounding per tap; stored only for c < valid_channels, r < valid_rows, j < valid_cols."""
    signature = types.void(buf, base, cols, offsets, weights, w_offset, biases, channel, out, out_offset, ldo, plane,
                           valid_rows, valid_cols, valid_channels)

    def codegen(context, builder, sig, args):
        (buf_, base_, cols_, offsets_, weights_, w_offset_, biases_, channel_, out_, out_offset_, ldo_, plane_,
         rows_, lanes_, channels_) = args
        i64 = _simd.I64
        buf_ptr = _simd.data(context, builder, sig.args[0], buf_, base_)
        offsets_array = context.make_array(sig.args[3])(context, builder, offsets_)
        taps = builder.extract_value(offsets_array.shape, 0)
        weight_ptrs = [_simd.data(context, builder, sig.args[4], weights_,
                                  builder.add(w_offset_, builder.mul(taps, ir.Constant(i64, c))))
                       for c in range(CHANNELS)]
        bias_ptr = _simd.data(context, builder, sig.args[6], biases_, channel_)
        starts = [_simd.splat(builder, builder.load(builder.gep(bias_ptr, [ir.Constant(i64, c)]), align=4))
                  for c in range(CHANNELS)]

        def tap(k, flat_sums):
            at = builder.load(builder.gep(offsets_array.data, [k]), align=8)
            tap_weights = [_simd.splat(builder, builder.load(builder.gep(p, [k]), align=4)) for p in weight_ptrs]
            new = []
            for r in range(ROWS):
                place = builder.add(at, builder.mul(cols_, ir.Constant(i64, r)))
                x = _simd.load_vector(builder, builder.gep(buf_ptr, [place]))
                new += [_simd.fma(builder, tap_weights[c], x, flat_sums[r * CHANNELS + c]) for c in range(CHANNELS)]
            return new

        flat = _simd.counted_loop(builder, taps, starts * ROWS, tap)
        new = [flat[r * CHANNELS:(r + 1) * CHANNELS] for r in range(ROWS)]

        out_ptr = _simd.data(context, builder, sig.args[8], out_, out_offset_)
        zero = ir.Constant(i64, 0)
        for r in range(ROWS):
            for c in range(CHANNELS):
                inside = builder.and_(builder.icmp_signed("<", ir.Constant(i64, r), rows_),
                                      builder.icmp_signed("<", ir.Constant(i64, c), channels_))
                place = builder.add(builder.mul(plane_, ir.Constant(i64, c)), builder.mul(ldo_, ir.Constant(i64, r)))
                _simd.store_first(builder, new[r][c], builder.gep(out_ptr, [place]), builder.select(inside, lanes_, zero))
        return context.get_dummy_value()

    return signature, codegen


@jit
def _conv(x, weights, biases, out, sh, sw, ph, pw, offsets, rows, cols):
    """out = conv(x) + bias for x (N, C, H, W) and weights (Cout padded to CHANNELS, C·taps),
    biases (the same padding); ``offsets`` (C·taps) address the phase planes of all channels."""
    n_images, channels, h, w = x.shape
    out_channels, out_h, out_w = out.shape[1], out.shape[2], out.shape[3]
    lanes = _simd.LANES
    plane_size = sh * sw * rows * cols  # one input channel's phase planes
    # a block's rows and lanes past the output's read up to ROWS rows and a vector beyond the
    # last channel's planes: zeros, never stored
    buf = np.zeros(channels * plane_size + ROWS * cols + lanes, dtype=np.float32)
    flat_weights = weights.reshape(-1)
    flat_out = out.reshape(-1)
    plane = out_h * out_w
    for n in range(n_images):
        for c in range(channels):
            _fill_phases(x[n, c], buf[c * plane_size:], sh, sw, ph, pw, rows, cols)
        for oc in range(0, out_channels, CHANNELS):
            first = (n * out_channels + oc) * plane
            for r0 in range(0, out_h, ROWS):
                for c0 in range(0, out_w, lanes):
                    _block(buf, r0 * cols + c0, cols, offsets, flat_weights, oc * len(offsets), biases, oc,
                           flat_out, first + r0 * out_w + c0, out_w, plane, out_h - r0, out_w - c0,
                           out_channels - oc)


def applies(x, w, groups: int) -> bool:
    """Whether ``conv2d`` runs this conv: float32, one group, at most MAX_INPUT_CHANNELS input
    channels, 2-d, on a CPU with the vector fused multiply-add."""
    return (_simd.available() and groups == 1 and x.ndim == 4 and x.shape[1] <= MAX_INPUT_CHANNELS
            and x.dtype == np.float32 and w.dtype == np.float32)


def conv2d(x, w, b, stride, padding, dilation):
    """y = conv2d(x, w) + b for float32 x (N, C, H, W), w (Cout, C, kh, kw), b (Cout,) or None."""
    n, c, h, wd = x.shape
    out_channels, _, kh, kw = w.shape
    (sh, sw), (ph, pw) = stride, padding
    out_h, out_w, rows, cols, offsets = _geometry(h, wd, kh, kw, tuple(stride), tuple(padding), tuple(dilation))
    plane_size = sh * sw * rows * cols
    all_offsets = np.concatenate([offsets + channel * plane_size for channel in range(c)])
    padded = -(-out_channels // CHANNELS) * CHANNELS
    weights = np.zeros((padded, c * kh * kw), np.float32)
    weights[:out_channels] = w.reshape(out_channels, -1)
    biases = np.zeros(padded, np.float32)
    if b is not None:
        biases[:out_channels] = b
    out = np.empty((n, out_channels, out_h, out_w), dtype=np.float32)
    _conv(np.ascontiguousarray(x), weights, biases, out, sh, sw, ph, pw, all_offsets, rows, cols)
    return out
