"""Depthwise convolution (one input channel per group) as one compiled loop nest.

Per image and channel, the zero-padded input plane is split into its stride phases (as
``FlatWindows`` does) in a buffer that stays in cache; on the *wide grid* (output rows as long
as a phase plane's rows) every kernel position then reads one contiguous range of that buffer,
at an offset of its own. Each output plane is the bias plus a few passes that each add four
kernel positions' products at once, then is cropped into the output. numpy needs a pass and a
temporary per kernel position and per operation (2·k² passes over the whole output).

On float32, where the CPU has AVX2 or AVX-512 (``_simd``), the output is instead made in
blocks of seven rows by one vector of columns whose sums stay in registers through all the
kernel positions (``_block``, in LLVM IR): one fused multiply-add per output element and
position, and no pass over a wide-grid accumulator per few positions; the extra columns of
the wide grid are not computed. Seven rows split the 7, 14, 28, 56 and 112-row maps of
mobile and ConvNeXt networks evenly, and seven independent sums keep the vector unit busy.
Several times faster than the wide-grid passes on ConvNeXt's 7x7 layers (``benchmarks/conv_layers.py``;
the figures are in benchmarks/RESULTS.md).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from . import _simd
from ._jit import inline, jit

_STEP = 64  # elements per step of the compiler's vectorized loops (4 AVX-512 vectors of float32)
BLOCK_ROWS = 7  # output rows per register block of the float32 kernel


@jit
def _fill_phases(x2d, buf, sh, sw, ph, pw, rows, cols):
    """buf[phase, r, t] = padded input[r·sh + a, t·sw + b] (phase = a·sw + b) where that is
    inside the input; the other entries (padding) are left as they are: zeros, as the caller
    made them, since every channel reads the same positions."""
    h, w = x2d.shape
    size = rows * cols
    for a in range(sh):
        # rows r with 0 <= r·sh + a - ph < h
        first_row, last_row = _inside(a, ph, sh, h, rows)
        if sw == 2:
            for r in range(first_row, last_row):
                _fill_pairs(x2d[r * sh + a - ph], buf, (a * 2) * size + r * cols, size, pw, cols)
            continue
        for b in range(sw):
            # columns t with 0 <= t·sw + b - pw < w
            first, last = _inside(b, pw, sw, w, cols)
            start = (a * sw + b) * size + first
            column = first * sw + b - pw
            for r in range(first_row, last_row):
                src = x2d[r * sh + a - ph, column:]
                dst = buf[start + r * cols: start + r * cols + last - first]
                if sw == 1:  # a plain copy, which the compiler vectorizes
                    for t in range(last - first):
                        dst[t] = src[t]
                else:
                    for t in range(last - first):
                        dst[t] = src[t * sw]


@inline
def _fill_pairs(line, buf, start, size, pw, cols):
    """Stride 2: input column j goes to column phase (j + pw) % 2, entry (j + pw) // 2, of the
    row starting at ``start`` (phase 0) or ``start + size`` (phase 1). One loop over the pairs
    (2u, 2u + 1) fills both phases: the compiler vectorizes such pairs, not a strided loop."""
    even_start = start + (pw % 2) * size
    odd_start = start + ((pw + 1) % 2) * size
    even = buf[even_start + pw // 2: even_start + cols]
    odd = buf[odd_start + (pw + 1) // 2: odd_start + cols]
    pairs = min(len(line) // 2, len(even), len(odd))
    for u in range(pairs):
        even[u] = line[2 * u]
        odd[u] = line[2 * u + 1]
    for j in range(2 * pairs, len(line)):
        t = (j + pw) // 2
        if t < cols:
            buf[start + ((j + pw) % 2) * size + t] = line[j]


@jit
def _inside(phase, pad, stride, size, extent):
    """The range of i in [0, extent) with 0 <= i·stride + phase - pad < size."""
    first = max(0, -((phase - pad) // stride))
    last = min(extent, (size - 1 - phase + pad) // stride + 1)
    return first, max(first, last)


@jit
def _accumulate(acc, buf, offsets, weights, count):
    """acc[q] += Σ_k weights[k]·buf[offsets[k] + q], up to eight kernel positions per pass."""
    k = 0
    while k + 8 <= len(offsets):
        w0, w1, w2, w3 = weights[k], weights[k + 1], weights[k + 2], weights[k + 3]
        w4, w5, w6, w7 = weights[k + 4], weights[k + 5], weights[k + 6], weights[k + 7]
        s0, s1 = buf[offsets[k]:offsets[k] + count], buf[offsets[k + 1]:offsets[k + 1] + count]
        s2, s3 = buf[offsets[k + 2]:offsets[k + 2] + count], buf[offsets[k + 3]:offsets[k + 3] + count]
        s4, s5 = buf[offsets[k + 4]:offsets[k + 4] + count], buf[offsets[k + 5]:offsets[k + 5] + count]
        s6, s7 = buf[offsets[k + 6]:offsets[k + 6] + count], buf[offsets[k + 7]:offsets[k + 7] + count]
        for q in range(count):
            acc[q] += ((w0 * s0[q] + w1 * s1[q]) + (w2 * s2[q] + w3 * s3[q])) + \
                ((w4 * s4[q] + w5 * s5[q]) + (w6 * s6[q] + w7 * s7[q]))
        k += 8
    while k + 4 <= len(offsets):
        w0, w1, w2, w3 = weights[k], weights[k + 1], weights[k + 2], weights[k + 3]
        s0, s1 = buf[offsets[k]:offsets[k] + count], buf[offsets[k + 1]:offsets[k + 1] + count]
        s2, s3 = buf[offsets[k + 2]:offsets[k + 2] + count], buf[offsets[k + 3]:offsets[k + 3] + count]
        for q in range(count):
            acc[q] += (w0 * s0[q] + w1 * s1[q]) + (w2 * s2[q] + w3 * s3[q])
        k += 4
    while k < len(offsets):
        w0 = weights[k]
        s0 = buf[offsets[k]:offsets[k] + count]
        for q in range(count):
            acc[q] += w0 * s0[q]
        k += 1


@jit
def whole_steps(count):
    """``count`` rounded up to whole steps of the compiler's vectorized loops: a loop over the
    wide grid does 64 elements a step and the rest one at a time, which on a 7x7 or 14x14 map
    was most of the time. The extra elements read slack at the end of the phase buffer and are
    dropped by the crop."""
    return (count + _STEP - 1) // _STEP * _STEP


@jit
def _depthwise(x, w, b, out, sh, sw, ph, pw, offsets, rows, cols):
    n_images, channels = x.shape[0], x.shape[1]
    out_channels, out_h = out.shape[1], out.shape[2]
    mult = out_channels // channels
    count = whole_steps(out_h * cols)
    buf = np.zeros(sh * sw * rows * cols + count, dtype=x.dtype)  # zero slack for the extra elements
    acc = np.empty(count, dtype=x.dtype)
    for n in range(n_images):
        for c in range(channels):
            _fill_phases(x[n, c], buf, sh, sw, ph, pw, rows, cols)
            for m in range(mult):
                oc = c * mult + m
                bias = b[oc]
                for q in range(count):
                    acc[q] = bias
                _accumulate(acc, buf, offsets, w[oc], count)
                _crop(acc, out[n, oc], cols)


@intrinsic
def _block(typingctx, buf, base, cols, offsets, weights, w_offset, bias, out, out_offset, ldo, valid_rows,
           valid_cols):
    """out[r·ldo + j] = bias + Σ_k weights[w_offset + k]·buf[base + offsets[k] + r·cols + j]
    for the block's rows r < min(valid_rows, BLOCK_ROWS) and lanes j < min(valid_cols, LANES)
    (float32; from ``out_offset``): one vector of sums per row, kept in registers over the
    kernel positions k and added to in their order, one rounding each. Lanes and rows past the
    valid ones are computed from whatever ``buf`` holds there and not stored."""
    signature = types.void(buf, base, cols, offsets, weights, w_offset, bias, out, out_offset, ldo, valid_rows,
                           valid_cols)

    def codegen(context, builder, sig, args):
        cols_, offsets_, ldo_, rows_, lanes_ = args[2], args[3], args[9], args[10], args[11]
        i64 = _simd.I64
        buf_ptr, weight_ptr, out_ptr, start_sums = _block_operands(context, builder, sig, args)
        offsets_array = context.make_array(sig.args[3])(context, builder, offsets_)
        taps = builder.extract_value(offsets_array.shape, 0)
        offset_ptr = offsets_array.data

        def tap(k, sums):
            at = builder.load(builder.gep(offset_ptr, [k]), align=8)
            weight = _simd.splat(builder, builder.load(builder.gep(weight_ptr, [k]), align=4))
            rows = [builder.gep(buf_ptr, [builder.add(at, builder.mul(cols_, ir.Constant(i64, r)))])
                    for r in range(BLOCK_ROWS)]
            return [_simd.fma(builder, weight, _simd.load_vector(builder, row), s) for row, s in zip(rows, sums)]

        new = _simd.counted_loop(builder, taps, [start_sums] * BLOCK_ROWS, tap)
        _store_rows(builder, new, out_ptr, ldo_, rows_, lanes_)
        return context.get_dummy_value()

    return signature, codegen


def _block_operands(context, builder, sig, args) -> tuple:
    """What both block kernels read from their shared arguments (buf, base, cols, offsets or
    kw, weights, w_offset, bias, out, out_offset, ...): pointers to the block's input, its
    channel's weights and its output, and the bias in every lane (the sums' start)."""
    buf_, base_, _, _, weights_, w_offset_, bias_, out_, out_offset_ = args[:9]
    return (_simd.data(context, builder, sig.args[0], buf_, base_),
            _simd.data(context, builder, sig.args[4], weights_, w_offset_),
            _simd.data(context, builder, sig.args[7], out_, out_offset_),
            _simd.splat(builder, bias_))


def _stride_one_block(kh: int):
    """``_block`` for a stride-1, undilated kernel ``kh`` rows high (``kw`` wide, a runtime
    argument): each input row vector is loaded once per kernel column and added, with its
    ``kh`` weights, to every output row of the block it reaches, instead of loaded once per
    (output row, kernel row); loads then no longer bound the vector unit. The sums run over
    kernel columns, then rows, each rounded once."""
    height = BLOCK_ROWS + kh - 1  # input rows a block reads

    @intrinsic
    def block(typingctx, buf, base, cols, kw, weights, w_offset, bias, out, out_offset, ldo, valid_rows, valid_cols):
        signature = types.void(buf, base, cols, kw, weights, w_offset, bias, out, out_offset, ldo, valid_rows,
                               valid_cols)

        def codegen(context, builder, sig, args):
            cols_, kw_, ldo_, rows_, lanes_ = args[2], args[3], args[9], args[10], args[11]
            i64 = _simd.I64
            buf_ptr, weight_ptr, out_ptr, start_sums = _block_operands(context, builder, sig, args)
            row_starts = [builder.mul(cols_, ir.Constant(i64, j)) for j in range(height)]

            def column(kx, sums):
                column_weights = []
                for ky in range(kh):
                    tap = builder.add(builder.mul(kw_, ir.Constant(i64, ky)), kx)
                    column_weights.append(_simd.splat(builder, builder.load(builder.gep(weight_ptr, [tap]), align=4)))
                new = list(sums)
                for j in range(height):
                    row = _simd.load_vector(builder, builder.gep(buf_ptr, [builder.add(row_starts[j], kx)]))
                    for ky in range(kh):
                        r = j - ky
                        if 0 <= r < BLOCK_ROWS:
                            new[r] = _simd.fma(builder, column_weights[ky], row, new[r])
                return new

            new = _simd.counted_loop(builder, kw_, [start_sums] * BLOCK_ROWS, column)
            _store_rows(builder, new, out_ptr, ldo_, rows_, lanes_)
            return context.get_dummy_value()

        return signature, codegen

    return block


_block3, _block5, _block7 = (_stride_one_block(kh) for kh in (3, 5, 7))


def _store_rows(builder, sums, out_ptr, ldo, valid_rows, valid_cols):
    """Row r of the block's sums to out_ptr + r·ldo, its first ``valid_cols`` lanes, for the
    rows r < ``valid_rows``."""
    i64 = _simd.I64
    for r, value in enumerate(sums):
        inside = builder.icmp_signed("<", ir.Constant(i64, r), valid_rows)
        count = builder.select(inside, valid_cols, ir.Constant(i64, 0))
        _simd.store_first(builder, value, builder.gep(out_ptr, [builder.mul(ldo, ir.Constant(i64, r))]), count)


@jit
def _depthwise_blocks(x, w, b, out, sh, sw, ph, pw, offsets, rows, cols, kh, kw, stride_one):
    """``_depthwise`` for float32 by register blocks on the phase buffer: ``_block``, or where
    ``stride_one`` (a stride-1 undilated kernel 3, 5 or 7 rows high: every phase-buffer offset
    is ky·cols + kx) the block that loads each input row once per kernel column."""
    n_images, channels = x.shape[0], x.shape[1]
    out_channels, out_h, out_w = out.shape[1], out.shape[2], out.shape[3]
    mult = out_channels // channels
    taps = len(offsets)
    lanes = _simd.LANES
    # a block's rows past the output's last row, and lanes past its last column, read up to
    # BLOCK_ROWS rows and a vector beyond the phase planes: zeros, never stored
    buf = np.zeros(sh * sw * rows * cols + BLOCK_ROWS * cols + lanes, dtype=np.float32)
    flat_weights = w.reshape(-1)
    flat_out = out.reshape(-1)
    for n in range(n_images):
        for c in range(channels):
            _fill_phases(x[n, c], buf, sh, sw, ph, pw, rows, cols)
            for m in range(mult):
                oc = c * mult + m
                plane = (n * out_channels + oc) * out_h * out_w
                for r0 in range(0, out_h, BLOCK_ROWS):
                    for c0 in range(0, out_w, lanes):
                        base, w_offset, at = r0 * cols + c0, oc * taps, plane + r0 * out_w + c0
                        valid_rows, valid_cols = out_h - r0, out_w - c0
                        if not stride_one:
                            _block(buf, base, cols, offsets, flat_weights, w_offset, b[oc], flat_out, at, out_w,
                                   valid_rows, valid_cols)
                        elif kh == 7:
                            _block7(buf, base, cols, kw, flat_weights, w_offset, b[oc], flat_out, at, out_w,
                                    valid_rows, valid_cols)
                        elif kh == 5:
                            _block5(buf, base, cols, kw, flat_weights, w_offset, b[oc], flat_out, at, out_w,
                                    valid_rows, valid_cols)
                        else:
                            _block3(buf, base, cols, kw, flat_weights, w_offset, b[oc], flat_out, at, out_w,
                                    valid_rows, valid_cols)


@inline
def _crop(acc, plane, cols):
    """The output plane (out_h, out_w) out of the wide grid ``acc`` (rows ``cols`` long)."""
    out_h, out_w = plane.shape
    for r in range(out_h):
        line = plane[r]
        wide = acc[r * cols:]
        for t in range(out_w):
            line[t] = wide[t]


@lru_cache(maxsize=256)
def _geometry(h, wd, kh, kw, stride, padding, dilation, out=None) -> tuple:
    """(out_h, out_w, rows, cols, offsets) of a conv's wide grid (or a pool's, whose output
    size ``out`` may be rounded up): computed once per layer shape (in Python, it cost more
    than a 7x7 map's whole compiled loop)."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    out_h = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1 if out is None else out[0]
    out_w = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1 if out is None else out[1]
    drow = [(i * dh) // sh for i in range(kh)]
    dcol = [(j * dw) // sw for j in range(kw)]
    cols = out_w + max(dcol)
    rows = out_h + max(drow) + 1  # a slack row: the wide grid's last row reads past its end
    offsets = np.array([(((i * dh) % sh) * sw + (j * dw) % sw) * rows * cols + drow[i] * cols + dcol[j]
                        for i in range(kh) for j in range(kw)], dtype=np.int64)
    offsets.flags.writeable = False
    return out_h, out_w, rows, cols, offsets


def depthwise_conv2d(x, w, b, stride, padding, dilation):
    """y = conv2d(x, w, groups=C) + b for x (N, C, H, W), w (C·m, 1, kh, kw), b (C·m,) or None;
    float32 or float64 (``w`` and ``b`` are cast to ``x``'s dtype)."""
    n, c, h, wd = x.shape
    out_channels, _, kh, kw = w.shape
    (sh, sw), (ph, pw) = stride, padding
    out_h, out_w, rows, cols, offsets = _geometry(h, wd, kh, kw, tuple(stride), tuple(padding), tuple(dilation))
    dtype = x.dtype
    weights = np.ascontiguousarray(w.reshape(out_channels, kh * kw), dtype=dtype)
    bias = np.zeros(out_channels, dtype) if b is None else np.ascontiguousarray(b, dtype=dtype)
    out = np.empty((n, out_channels, out_h, out_w), dtype=dtype)
    if dtype == np.float32 and _simd.available():
        stride_one = tuple(stride) == (1, 1) and tuple(dilation) == (1, 1) and kh in (3, 5, 7)
        _depthwise_blocks(np.ascontiguousarray(x), weights, bias, out, sh, sw, ph, pw, offsets, rows, cols, kh, kw,
                          stride_one)
    else:
        _depthwise(np.ascontiguousarray(x), weights, bias, out, sh, sw, ph, pw, offsets, rows, cols)
    return out
