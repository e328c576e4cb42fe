"""Emitters of linear algebra, convolution, normalization, pooling, dropout and attention."""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as _dt
from ._base import cast_input, emitter, onnx_type, reduce_node, unsupported


# --- linear algebra ----------------------------------------------------------------------------

@emitter("linear")
def linear(b, node, ins, outs):
    x, w = node.inputs[0], node.inputs[1]
    if x.ndim == 2:
        b.add("Gemm", ins, outs, transB=1)
        return
    # a Gemm on the rows, so the file keeps one op per linear layer (and imports back as linear)
    rows = b.add("Reshape", [ins[0], b.ints((-1, w.shape[1]))])
    y = b.add("Gemm", [rows, ins[1], ins[2]], transB=1)
    b.add("Reshape", [y, b.ints(node.outputs[0].shape)], outs)


@emitter("einsum")
def einsum(b, node, ins, outs):
    b.add("Einsum", ins, outs, equation=node.attrs["equation"])


@emitter("dequantize", "quantized_linear")
def quantized(b, node, ins, outs):
    # blockwise int4/float8 weights are DequantizeLinear with block_size from opset 21 on
    raise unsupported(node, f"weights stored as {node.inputs[1 if node.op_name == 'quantized_linear' else 0].dtype.name} "
                            f"with block scales have no export yet; export the model before quantize_weights")


@emitter("requantize")
def requantize(b, node, ins, outs):
    # TFLite's fixed point on int64 ONNX ops (ops/quantized.py): integer Div truncates toward
    # zero as C++ does, and Mod (fmod=0) by a power of two is the low bits a right shift drops
    def const(value):
        return b.scalar(value, _dt.int64)

    x = cast_input(b, node, ins, 0, _dt.int64)
    multiplier, shift = ins[1], ins[2]
    zero, two = const(0), const(2)
    x = b.add("Mul", [x, b.add("Pow", [two, b.add("Max", [shift, zero])])])
    product = b.add("Mul", [x, multiplier])
    nudge = b.add("Where", [b.add("GreaterOrEqual", [product, zero]), const(1 << 30), const(1 - (1 << 30))])
    high = b.add("Div", [b.add("Add", [product, nudge]), const(1 << 31)])
    power = b.add("Pow", [two, b.add("Max", [b.add("Neg", [shift]), zero])])
    remainder = b.add("Mod", [high, power], fmod=0)
    threshold = b.add("Add", [b.add("Div", [b.add("Sub", [power, const(1)]), two]),
                              b.add("Cast", [b.add("Less", [high, zero])], to=onnx_type(_dt.int64))])
    rounded = b.add("Cast", [b.add("Greater", [remainder, threshold])], to=onnx_type(_dt.int64))
    y = b.add("Add", [b.add("Div", [b.add("Sub", [high, remainder]), power]), rounded])
    if node.attrs.get("zero_point") is not None:
        y = b.add("Add", [y, const(node.attrs["zero_point"])])
    dtype = node.outputs[0].dtype
    info = np.iinfo(dtype.np)
    b.add("Cast", [b.add("Clip", [y, const(int(info.min)), const(int(info.max))])], outs, to=onnx_type(dtype))


@emitter("embedding")
def embedding(b, node, ins, outs):
    b.add("Gather", ins, outs, axis=0)


# --- convolution, normalization, pooling ---------------------------------------------------------

@emitter("conv")
def conv(b, node, ins, outs):
    a = node.attrs
    b.add("Conv", ins, outs, kernel_shape=list(node.inputs[1].shape[2:]), strides=list(a["stride"]),
          pads=list(a["padding"]) * 2, dilations=list(a["dilation"]), group=a["groups"])


@emitter("conv_transpose")
def conv_transpose(b, node, ins, outs):
    a = node.attrs
    b.add("ConvTranspose", ins, outs, kernel_shape=list(node.inputs[1].shape[2:]), strides=list(a["stride"]),
          pads=list(a["padding"]) * 2, output_padding=list(a["output_padding"]),
          dilations=list(a["dilation"]), group=a["groups"])


@emitter("batch_norm")
def batch_norm(b, node, ins, outs):
    if node.attrs["training"]:
        raise unsupported(node, "batch norm in training mode (batch statistics); export the model in eval()")
    x = node.inputs[0]
    c, dtype = x.shape[1], x.dtype
    scale = ins[1] or b.const(np.ones(c, dtype.np), "bn_scale")
    bias = ins[2] or b.const(np.zeros(c, dtype.np), "bn_bias")
    b.add("BatchNormalization", [ins[0], scale, bias, ins[3], ins[4]], outs, epsilon=node.attrs["eps"])


def _standardize(b, x: str, axes, eps: float, dtype, out=None):
    """(x − mean) / sqrt(var + eps) over ``axes`` (biased variance)."""
    centered = b.add("Sub", [x, reduce_node(b, "ReduceMean", x, axes, True)])
    var = reduce_node(b, "ReduceMean", b.add("Mul", [centered, centered]), axes, True)
    std = b.add("Sqrt", [b.add("Add", [var, b.scalar(eps, dtype)])])
    return b.add("Div", [centered, std], out)


@emitter("layer_norm")
def layer_norm(b, node, ins, outs):
    x = node.inputs[0]
    k = len(node.attrs["normalized_shape"])
    eps = node.attrs["eps"]
    if b.opset >= 17:
        scale = ins[1] or b.const(np.ones(node.attrs["normalized_shape"], x.dtype.np), "ln_scale")
        b.add("LayerNormalization", [ins[0], scale] + ([ins[2]] if ins[2] else []), outs, axis=-k, epsilon=eps)
        return
    _affine(b, _standardize(b, ins[0], range(x.ndim - k, x.ndim), eps, x.dtype), ins[1], ins[2], outs)


def _affine(b, y: str, weight, bias, outs):
    if weight is None and bias is None:
        return b.add("Identity", [y], outs)
    if weight is not None:
        y = b.add("Mul", [y, weight], None if bias is not None else outs)
    if bias is not None:
        y = b.add("Add", [y, bias], outs)
    return y


@emitter("group_norm")
def group_norm(b, node, ins, outs):
    x = node.inputs[0]
    groups, eps = node.attrs["num_groups"], node.attrs["eps"]
    n, c = x.shape[0], x.shape[1]
    # an instance norm over (N, groups, rest) standardizes each group; then the per-channel affine
    grouped = b.add("Reshape", [ins[0], b.ints((n, groups, -1))])
    ones, zeros = b.const(np.ones(groups, x.dtype.np), "gn_scale"), b.const(np.zeros(groups, x.dtype.np), "gn_bias")
    y = b.add("InstanceNormalization", [grouped, ones, zeros], epsilon=eps)
    y = b.add("Reshape", [y, b.ints(x.shape)])
    view = b.ints((c,) + (1,) * (x.ndim - 2))
    weight = None if ins[1] is None else b.add("Reshape", [ins[1], view])
    bias = None if ins[2] is None else b.add("Reshape", [ins[2], view])
    _affine(b, y, weight, bias, outs)


@emitter("rms_norm")
def rms_norm(b, node, ins, outs):
    x = node.inputs[0]
    k = len(node.attrs["normalized_shape"])
    square = reduce_node(b, "ReduceMean", b.add("Mul", [ins[0], ins[0]]), range(x.ndim - k, x.ndim), True)
    rstd = b.add("Reciprocal", [b.add("Sqrt", [b.add("Add", [square, b.scalar(node.attrs["eps"], x.dtype)])])])
    _affine(b, b.add("Mul", [ins[0], rstd]), ins[1], None, outs)


@emitter("max_pool")
def max_pool(b, node, ins, outs):
    a = node.attrs
    b.add("MaxPool", ins, outs, kernel_shape=list(a["kernel_size"]), strides=list(a["stride"]),
          pads=list(a["padding"]) * 2, dilations=list(a["dilation"]), ceil_mode=int(a["ceil_mode"]))


@emitter("avg_pool")
def avg_pool(b, node, ins, outs):
    a = node.attrs
    attrs = dict(kernel_shape=list(a["kernel_size"]), strides=list(a["stride"]), pads=list(a["padding"]) * 2,
                 ceil_mode=int(a["ceil_mode"]))
    if a["divisor_override"] is None:
        b.add("AveragePool", ins, outs, count_include_pad=int(a["count_include_pad"]), **attrs)
        return
    # a fixed divisor: the window sum (mean over the full window times its size) over it
    y = b.add("AveragePool", ins, count_include_pad=1, **attrs)
    factor = math.prod(a["kernel_size"]) / a["divisor_override"]
    b.add("Mul", [y, b.scalar(factor, node.inputs[0].dtype)], outs)


@emitter("adaptive_avg_pool", "adaptive_max_pool")
def adaptive_pool(b, node, ins, outs):
    op_type = "AveragePool" if node.op_name == "adaptive_avg_pool" else "MaxPool"
    x = node.inputs[0]
    sizes, out = x.shape[2:], node.attrs["output_size"]
    if all(o == 1 for o in out):
        b.add("Global" + op_type, ins, outs)
    elif all(n % o == 0 for n, o in zip(sizes, out)):  # equal windows: an ordinary pooling
        kernel = [n // o for n, o in zip(sizes, out)]
        b.add(op_type, ins, outs, kernel_shape=kernel, strides=kernel)
    else:
        raise unsupported(node, f"adaptive pooling of {x.shape} to {out} has unequal windows, which no "
                                 f"ONNX pooling op has")


@emitter("dropout")
def dropout(b, node, ins, outs):
    if node.attrs["training"]:
        raise unsupported(node, "dropout in training mode draws random masks; export the model in eval()")
    b.add("Identity", ins, [outs[0]])
    mask = node.outputs[1]
    b.add("Expand", [b.const(np.array(True)), b.ints(mask.shape)], [outs[1]])

# --- attention ---------------------------------------------------------------------------------

@emitter("scaled_dot_product_attention")
def attention(b, node, ins, outs):
    """softmax(q·kᵀ·scale + mask)·v written out: both contractions stay MatMul nodes."""
    a = node.attrs
    if a["dropout_p"] > 0:
        raise unsupported(node, "attention dropout draws random masks; export the model in eval()")
    q, k, v = node.inputs[0], node.inputs[1], node.inputs[2]
    dtype = q.dtype
    key, value = ins[1], ins[2]
    heads = q.shape[-3] if q.ndim >= 3 else 1
    if a["enable_gqa"] and k.ndim >= 3 and k.shape[-3] != heads:
        key, value = (_repeat_heads(b, name, t, heads // t.shape[-3]) for name, t in ((key, k), (value, v)))
    perm = list(range(k.ndim))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    scores = b.add("MatMul", [ins[0], b.add("Transpose", [key], perm=perm)])
    scale = a["scale"] if a["scale"] is not None else 1 / math.sqrt(q.shape[-1])
    scores = b.add("Mul", [scores, b.scalar(scale, dtype)])
    lq, lk = q.shape[-2], k.shape[-2]
    if a["is_causal"]:
        keep = np.tril(np.ones((lq, lk), dtype=bool))
        scores = b.add("Add", [scores, b.const(np.where(keep, 0, -np.inf).astype(dtype.np), "causal_mask")])
    mask = node.inputs[3]
    if mask is not None:
        if mask.dtype is _dt.bool_:
            scores = b.add("Where", [ins[3], scores, b.scalar(-np.inf, dtype)])
        else:
            scores = b.add("Add", [scores, b.cast(ins[3], mask.dtype, dtype)])
    probs = b.add("Softmax", [scores], axis=-1)
    b.add("MatMul", [probs, value], outs)


def _repeat_heads(b, name: str, t, rep: int) -> str:
    """(..., Hkv, L, D) -> (..., Hkv·rep, L, D), each head repeated for its query group."""
    shape = tuple(t.shape)
    wide = b.add("Unsqueeze", [name, b.ints([len(shape) - 2])])
    wide = b.add("Expand", [wide, b.ints(shape[:-2] + (rep,) + shape[-2:])])
    return b.add("Reshape", [wide, b.ints(shape[:-3] + (shape[-3] * rep,) + shape[-2:])])
