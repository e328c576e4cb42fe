"""Emitters of elementwise ops, activations and softmax."""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ._base import cast_input, emitter, onnx_type


# --- elementwise -------------------------------------------------------------------------------

_LOGIC = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}


@emitter("pow")
def pow_(b, node, ins, outs):
    b.add("Pow", [cast_input(b, node, ins, 0, node.outputs[0].dtype), ins[1]], outs)


@emitter("ne")
def not_equal(b, node, ins, outs):
    dtype = _dt.promote(node.inputs[0].dtype, node.inputs[1].dtype)
    b.add("Not", [b.add("Equal", [cast_input(b, node, ins, 0, dtype), cast_input(b, node, ins, 1, dtype)])], outs)


# not ``Op.onnx``: And, Or, Xor and Not take bool only, so the operands become bool whatever
# their dtype, where the one-node emitter would cast a comparison's operands to their common dtype
@emitter(*_LOGIC)
def logic(b, node, ins, outs):
    b.add(_LOGIC[node.op_name], [cast_input(b, node, ins, 0, _dt.bool_), cast_input(b, node, ins, 1, _dt.bool_)], outs)


@emitter("logical_not")
def logical_not(b, node, ins, outs):
    b.add("Not", [cast_input(b, node, ins, 0, _dt.bool_)], outs)


@emitter("rsqrt")
def rsqrt(b, node, ins, outs):
    b.add("Reciprocal", [b.add("Sqrt", [cast_input(b, node, ins, 0, node.outputs[0].dtype)])], outs)


@emitter("floor_divide")
def floor_divide(b, node, ins, outs):
    dtype = node.outputs[0].dtype
    if dtype.is_floating_point:
        b.add("Floor", [b.add("Div", [cast_input(b, node, ins, 0, dtype), cast_input(b, node, ins, 1, dtype)])], outs)
        return
    # ONNX divides integers toward zero; in float64 the floor is exact for |values| < 2**53
    q = b.add("Floor", [b.add("Div", [cast_input(b, node, ins, 0, _dt.float64), cast_input(b, node, ins, 1, _dt.float64)])])
    b.add("Cast", [q], outs, to=onnx_type(dtype))


@emitter("remainder")
def remainder(b, node, ins, outs):
    dtype = node.outputs[0].dtype
    a, c = cast_input(b, node, ins, 0, dtype), cast_input(b, node, ins, 1, dtype)
    if not dtype.is_floating_point:
        b.add("Mod", [a, c], outs, fmod=0)  # the sign of the divisor, as Python's %
        return
    # ONNX's float Mod is C's fmod; Python's remainder is a - b·floor(a / b)
    b.add("Sub", [a, b.add("Mul", [c, b.add("Floor", [b.add("Div", [a, c])])])], outs)


@emitter("where")
def where(b, node, ins, outs):
    dtype = node.outputs[0].dtype
    b.add("Where", [ins[0], cast_input(b, node, ins, 1, dtype), cast_input(b, node, ins, 2, dtype)], outs)


@emitter("clamp")
def clamp(b, node, ins, outs):
    dtype = node.inputs[0].dtype
    low, high = node.attrs.get("min"), node.attrs.get("max")
    b.add("Clip", [ins[0], None if low is None else b.scalar(low, dtype),
                   None if high is None else b.scalar(high, dtype)], outs)


@emitter("hardtanh")
def hardtanh(b, node, ins, outs):
    dtype = node.inputs[0].dtype
    b.add("Clip", [ins[0], b.scalar(node.attrs["min_val"], dtype), b.scalar(node.attrs["max_val"], dtype)], outs)

@emitter("cast")
def cast(b, node, ins, outs):
    b.add("Cast", ins, outs, to=onnx_type(node.outputs[0].dtype))


# --- activations -------------------------------------------------------------------------------

@emitter("leaky_relu")
def leaky_relu(b, node, ins, outs):
    b.add("LeakyRelu", ins, outs, alpha=float(node.attrs["negative_slope"]))


@emitter("prelu")
def prelu(b, node, ins, outs):
    x, w = node.inputs
    slope = ins[1]
    if w.numel() > 1:  # one slope per channel (dim 1): (C, 1, ..., 1) broadcasts from the right
        slope = b.add("Reshape", [slope, b.ints((w.numel(),) + (1,) * (x.ndim - 2))])
    b.add("PRelu", [ins[0], slope], outs)


@emitter("elu")
def elu(b, node, ins, outs):
    from ...ops.activations import SELU_ALPHA, SELU_SCALE

    alpha, scale, input_scale = node.attrs["alpha"], node.attrs["scale"], node.attrs["input_scale"]
    if scale == 1 and input_scale == 1:
        b.add("Elu", ins, outs, alpha=float(alpha))
    elif input_scale == 1 and alpha == SELU_ALPHA and scale == SELU_SCALE:
        b.add("Selu", ins, outs, alpha=float(alpha), gamma=float(scale))
    elif scale == 1 and math.isclose(input_scale, 1 / alpha):
        b.add("Celu", ins, outs, alpha=float(alpha))
    else:  # scale·elu(input_scale·x, alpha) with the scales as multiplies
        dtype = node.inputs[0].dtype
        x = b.add("Mul", [ins[0], b.scalar(input_scale, dtype)])
        y = b.add("Elu", [x], alpha=float(alpha))
        positive = b.add("Greater", [ins[0], b.scalar(0, dtype)])
        y = b.add("Where", [positive, ins[0], b.add("Div", [y, b.scalar(input_scale, dtype)])])
        b.add("Mul", [y, b.scalar(scale, dtype)], outs)


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


@emitter("gelu")
def gelu(b, node, ins, outs):
    approximate = node.attrs["approximate"]
    if b.opset >= 20:
        b.add("Gelu", ins, outs, approximate=approximate)
        return
    dtype = node.inputs[0].dtype
    x = ins[0]
    half_x = b.add("Mul", [x, b.scalar(0.5, dtype)])
    if approximate == "tanh":  # 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x³)))
        cube = b.add("Mul", [b.add("Mul", [x, x]), x])
        inner = b.add("Add", [x, b.add("Mul", [cube, b.scalar(0.044715, dtype)])])
        t = b.add("Tanh", [b.add("Mul", [inner, b.scalar(_SQRT_2_OVER_PI, dtype)])])
    else:  # 0.5·x·(1 + erf(x / sqrt(2)))
        t = b.add("Erf", [b.add("Mul", [x, b.scalar(1 / math.sqrt(2), dtype)])])
    b.add("Mul", [half_x, b.add("Add", [t, b.scalar(1.0, dtype)])], outs)


@emitter("silu")
def silu(b, node, ins, outs):
    b.add("Mul", [ins[0], b.add("Sigmoid", ins)], outs)


@emitter("hardsigmoid")
def hardsigmoid(b, node, ins, outs):
    b.add("HardSigmoid", ins, outs, alpha=1 / 6, beta=0.5)


@emitter("hardswish")
def hardswish(b, node, ins, outs):
    if b.opset >= 14:
        b.add("HardSwish", ins, outs)
    else:  # x·hardsigmoid(x)
        b.add("Mul", [ins[0], b.add("HardSigmoid", ins, alpha=1 / 6, beta=0.5)], outs)


@emitter("softplus")
def softplus(b, node, ins, outs):
    beta = node.attrs["beta"]
    if beta == 1:
        b.add("Softplus", ins, outs)  # exact log(1 + exp(x)); the runtime's threshold only avoids overflow
        return
    dtype = node.inputs[0].dtype
    scaled = b.add("Softplus", [b.add("Mul", [ins[0], b.scalar(beta, dtype)])])
    b.add("Div", [scaled, b.scalar(beta, dtype)], outs)


@emitter("mish")
def mish(b, node, ins, outs):
    if b.opset >= 18:
        b.add("Mish", ins, outs)
    else:
        b.add("Mul", [ins[0], b.add("Tanh", [b.add("Softplus", ins)])], outs)


@emitter("softmax", "log_softmax")
def softmax(b, node, ins, outs):
    b.add("Softmax" if node.op_name == "softmax" else "LogSoftmax", ins, outs, axis=node.attrs["dim"])
