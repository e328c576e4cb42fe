"""Emitters of the runtime ops that ONNX has as operators of their own (added for import:
TopK, NonZero, GridSample, RoiAlign, NonMaxSuppression, the scatters...): one node each, with
its attributes, refused at opsets before the operator exists (the trigonometric and bitwise
ops, Det, name their operator in ``Op.onnx`` and need no emitter). ``resample``,
which ONNX has no operator for, is written as one Gather and Mul per tap, summed; ``sort`` as a
TopK of every element; ``complex_mul`` as the real arithmetic of the two parts. ``histc`` and
``grouped_mm`` (no ONNX operator; groups whose sizes are values) are refused.
"""

from __future__ import annotations

import numpy as np

from ._base import emitter, needs_opset, unsupported as _unsupported


@emitter("nonzero")
def nonzero(b, node, ins, outs):
    b.add("NonZero", ins, outs)  # int64 positions of any dtype's input: the input is not cast


@emitter("bitshift")
def bitshift(b, node, ins, outs):
    b.add("BitShift", ins, outs, direction=node.attrs["direction"].upper())


@emitter("topk")
def topk(b, node, ins, outs):
    a = node.attrs
    b.add("TopK", [ins[0], b.ints([a["k"]])], outs, axis=a["dim"], largest=int(a["largest"]), sorted=int(a["sorted"]))


@emitter("sort")
def sort(b, node, ins, outs):
    a = node.attrs
    x = node.inputs[0]
    n = x.shape[a["dim"] % x.ndim] if x.ndim else 1
    # ONNX's TopK keeps equal values in index order, as the runtime's stable sort
    b.add("TopK", [ins[0], b.ints([n])], outs, axis=a["dim"], largest=int(a["descending"]), sorted=1)


@emitter("complex_mul")
def complex_mul(b, node, ins, outs):
    """(ar + ai·i)(br ± bi·i) on the (real, imaginary) pairs of the last dim."""
    dtype = node.outputs[0].dtype
    a, c = (b.cast(ins[i], node.inputs[i].dtype, dtype) for i in (0, 1))
    ar, ai, br, bi = (b.add("Gather", [t, b.ints([k])], axis=-1) for t in (a, c) for k in (0, 1))
    if node.attrs["conjugate"]:
        bi = b.add("Neg", [bi])
    real = b.add("Sub", [b.add("Mul", [ar, br]), b.add("Mul", [ai, bi])])
    imag = b.add("Add", [b.add("Mul", [ar, bi]), b.add("Mul", [ai, br])])
    b.add("Concat", [real, imag], outs, axis=-1)


@emitter("histc")
def histc(b, node, ins, outs):
    raise _unsupported(node, "ONNX has no histogram operator")


@emitter("grouped_mm")
def grouped_mm(b, node, ins, outs):
    raise _unsupported(node, "ONNX has no grouped matrix product (group sizes held in a tensor)")


@emitter("unique")
def unique(b, node, ins, outs):
    b.add("Unique", ins, outs, axis=node.attrs["dim"], sorted=int(node.attrs["sorted"]))


@emitter("scatter_elements")
def scatter_elements(b, node, ins, outs):
    reduction = node.attrs["reduction"]
    needs_opset(b, node, f"ScatterElements with reduction {reduction!r}",
                {"none": 11, "add": 16, "mul": 16}.get(reduction, 18))
    b.add("ScatterElements", ins, outs, axis=node.attrs["dim"], reduction=None if reduction == "none" else reduction)


@emitter("scatter_nd")
def scatter_nd(b, node, ins, outs):
    reduction = node.attrs["reduction"]
    needs_opset(b, node, f"ScatterND with reduction {reduction!r}",
                {"none": 11, "add": 16, "mul": 16}.get(reduction, 18))
    b.add("ScatterND", ins, outs, reduction=None if reduction == "none" else reduction)


@emitter("cumprod")
def cumprod(b, node, ins, outs):
    needs_opset(b, node, "CumProd", 26)
    b.add("CumProd", [ins[0], b.ints([node.attrs["dim"]])], outs)


@emitter("grid_sample")
def grid_sample(b, node, ins, outs):
    a = node.attrs
    needs_opset(b, node, "GridSample", 16)
    mode = a["mode"] if b.opset >= 20 else {"linear": "bilinear", "cubic": "bicubic"}.get(a["mode"], a["mode"])
    if node.inputs[0].ndim != 4 and b.opset < 20:
        raise _unsupported(node, "a volumetric GridSample needs opset 20 or later")
    b.add("GridSample", ins, outs, mode=mode, padding_mode=a["padding_mode"], align_corners=int(a["align_corners"]))


@emitter("roi_align")
def roi_align(b, node, ins, outs):
    a = node.attrs
    needs_opset(b, node, "RoiAlign with coordinate_transformation_mode", 16)
    b.add("RoiAlign", ins, outs, mode=a["mode"], output_height=a["output_size"][0], output_width=a["output_size"][1],
          sampling_ratio=a["sampling_ratio"], spatial_scale=a["spatial_scale"],
          coordinate_transformation_mode="half_pixel" if a["aligned"] else "output_half_pixel")


@emitter("non_max_suppression")
def non_max_suppression(b, node, ins, outs):
    a = node.attrs
    inputs = ins[:2] + [b.ints([a["max_output_boxes_per_class"]]),
                        b.const(np.array([a["iou_threshold"]], np.float32), "iou_threshold")]
    if a["score_threshold"] is not None:
        inputs.append(b.const(np.array([a["score_threshold"]], np.float32), "score_threshold"))
    b.add("NonMaxSuppression", inputs, outs, center_point_box=int(a["center_point_box"]))


@emitter("resample")
def resample(b, node, ins, outs):
    x, index, weight = node.inputs
    d = node.attrs["dim"] % x.ndim
    view = [1] * x.ndim
    view[d] = -1
    total = None
    for t in range(index.shape[1]):
        column = b.add("Gather", [ins[1], b.ints([t])], axis=1)              # (O, 1)
        picked = b.add("Gather", [ins[0], b.add("Reshape", [column, b.ints([-1])])], axis=d)
        w = b.add("Gather", [ins[2], b.ints([t])], axis=1)
        w = b.cast(b.add("Reshape", [w, b.ints(view)]), weight.dtype, x.dtype)
        term = b.add("Mul", [picked, w])
        total = term if total is None else b.add("Add", [total, term])
    b.add("Identity", [total], outs)


@emitter("opaque")
def opaque(b, node, ins, outs):
    raise _unsupported(node, f"{node.attrs['label']} node {node.attrs['node']!r} was imported without a converter; "
                             f"flopcount cannot write it back")


@emitter("dft")
def dft(b, node, ins, outs):
    a = node.attrs
    needs_opset(b, node, "DFT", 17)
    inputs = [ins[0], b.const(np.array(a["length"], np.int64), "dft_length")]  # a scalar, as ONNX asks
    extra = {"inverse": int(a["inverse"]), "onesided": int(a["onesided"])}
    if b.opset >= 20:
        inputs.append(b.const(np.array(a["dim"], np.int64), "axis"))
    else:
        extra["axis"] = a["dim"]
    b.add("DFT", inputs, outs, **extra)


@emitter("bitcast")
def bitcast(b, node, ins, outs):
    from ..elem_types import from_dtype

    needs_opset(b, node, "BitCast", 26)
    b.add("BitCast", ins, outs, to=from_dtype(node.outputs[0].dtype))


@emitter("inverse")
def inverse(b, node, ins, outs):
    raise _unsupported(node, "ONNX has no matrix inverse operator")
