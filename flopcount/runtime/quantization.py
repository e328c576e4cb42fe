"""Weight formats: a model's Linear weights stored in int8, int4 or float8 with block scales.

A format is a weight dtype, how many consecutive weights of a row share one scale (a group of
128, a whole row: ``channel``, or the whole matrix: ``tensor``) and the scales' dtype. Written
``NAME[:GROUP]``:

==========  ==================  ========  =====================================  ================
name        weight              scale     default group                          bits per weight
==========  ==================  ========  =====================================  ================
``int8``    int8                float16   ``channel`` (one scale per output row)  8 + 16/in
``int4``    int4                float16   128 (AWQ / GPTQ layouts, no zeros)       4.125
``fp8``     float8_e4m3fn       float32   ``tensor`` (FP8 serving's per-tensor)    8 + 32/(out·in)
==========  ==================  ========  =====================================  ================

``int4:g64``, ``int8:g128``, ``fp8:channel`` change the group. ``quantize_weights`` replaces
every ``nn.Linear`` of a model (but the ones named in ``skip``, ``lm_head`` by default as
AutoAWQ and GPTQ leave it, and any whose weight is shared with another layer) by a
``QuantizedLinear`` holding the quantized weight and its scales: its op reads the weight at its
element size (``DType.bits``) plus the scales, so parameter memory and the bytes each layer
reads follow the format. Real weights are quantized (symmetric: scale = max |w| of the group
over the type's largest value, round to nearest); on the meta device only shapes change.

>>> import flopcount.runtime as rt
>>> fmt = rt.weight_format("int4")
>>> fmt.bits_per_weight(in_features=4096, out_features=4096)
4.125
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from . import dtypes as _dt
from .errors import ShapeError
from .nn.modules.linear import Linear
from .nn.modules.quantized import QuantizedLinear
from .nn.parameter import Parameter
from .tensor import Tensor

CHANNEL, TENSOR = "channel", "tensor"


@dataclass(frozen=True)
class WeightFormat:
    """How a weight is stored: ``dtype`` (int8, int4, float8_e4m3fn...), ``group`` (an int, or
    ``"channel"`` / ``"tensor"``) and ``scale_dtype``."""

    name: str
    dtype: _dt.DType
    group: int | str
    scale_dtype: _dt.DType

    def group_size(self, in_features: int) -> int:
        return in_features if self.group in (CHANNEL, TENSOR) else self.group

    def scale_shape(self, out_features: int, in_features: int) -> tuple:
        if self.group == TENSOR:
            return (1, 1)
        return (out_features, in_features // self.group_size(in_features))

    def bits_per_weight(self, in_features: int, out_features: int) -> float:
        """Bits per weight of an (out, in) matrix, its scales included."""
        scales = int(np.prod(self.scale_shape(out_features, in_features)))
        return self.dtype.bits + scales * self.scale_dtype.bits / (out_features * in_features)

    def __str__(self) -> str:
        return self.name


_BASE = {
    "int8": (_dt.int8, CHANNEL, _dt.float16),
    "int4": (_dt.int4, 128, _dt.float16),
    "fp8": (_dt.float8_e4m3fn, TENSOR, _dt.float32),
    "float8_e4m3fn": (_dt.float8_e4m3fn, TENSOR, _dt.float32),
}


def weight_format(spec) -> WeightFormat:
    """``"int4"``, ``"int4:g64"``, ``"int8:channel"``, ``"fp8:tensor"`` (or a WeightFormat) as a
    WeightFormat; anything else is a ShapeError listing what is known."""
    if isinstance(spec, WeightFormat):
        return spec
    text = str(spec).strip().lower()
    name, _, group_text = text.partition(":")
    if name not in _BASE:
        raise ShapeError(f"unknown weight format {spec!r}; known: {', '.join(_BASE)} "
                         f"(optionally :gN, :channel or :tensor, e.g. int4:g64)")
    dtype, group, scale_dtype = _BASE[name]
    if group_text:
        if group_text in (CHANNEL, TENSOR):
            group = group_text
        elif group_text.startswith("g") and group_text[1:].isdigit() and int(group_text[1:]) >= 1:
            group = int(group_text[1:])
        else:
            raise ShapeError(f"weight format {spec!r}: the group is gN (N >= 1), channel or tensor, "
                             f"not {group_text!r}")
    label = name if not group_text else f"{name}:{group_text}"
    return WeightFormat(label, dtype, group, scale_dtype)


def _quantize(weight: np.ndarray, fmt: WeightFormat, scale_shape: tuple) -> tuple:
    """(q, scale) of a float weight: symmetric, scale = max |w| of the group / the type's max."""
    out, cols = weight.shape
    w = weight.astype(np.float32)
    blocks = w.reshape(1, 1, -1) if fmt.group == TENSOR else w.reshape(out, scale_shape[1], -1)
    top = float(ml_dtypes.finfo(fmt.dtype.np).max) if fmt.dtype.is_floating_point else \
        float(ml_dtypes.iinfo(fmt.dtype.np).max)
    scale = np.abs(blocks).max(axis=-1) / top
    scale = np.where(scale > 0, scale, 1.0).astype(fmt.scale_dtype.np)  # an all-zero group
    scaled = blocks / scale.astype(np.float32)[..., None]
    if fmt.dtype.is_floating_point:
        q = scaled.astype(fmt.dtype.np)
    else:
        q = np.clip(np.rint(scaled), -top, top).astype(fmt.dtype.np)
    return q.reshape(out, cols), scale


def quantize_linear(layer: Linear, fmt) -> QuantizedLinear:
    """A QuantizedLinear holding ``layer``'s weight in format ``fmt`` (its bias as it is)."""
    fmt = weight_format(fmt)
    out, cols = layer.weight.shape
    group = fmt.group_size(cols)
    if cols % group:
        raise ShapeError(f"weight format {fmt}: a group of {group} does not divide the {cols} input "
                         f"features of a Linear({cols}, {out})")
    scale_shape = fmt.scale_shape(out, cols)
    w = layer.weight
    if w.data is None:  # meta: shapes only
        q = Tensor._make(None, (out, cols), fmt.dtype, w.device)
        scale = Tensor._make(None, scale_shape, fmt.scale_dtype, w.device)
    else:
        q_np, scale_np = _quantize(w.numpy(), fmt, scale_shape)
        from .tensor import tensor

        q, scale = tensor(q_np, device=w.device), tensor(scale_np, device=w.device)
    bias = layer.bias
    return QuantizedLinear(Parameter(q, requires_grad=False), Parameter(scale, requires_grad=False),
                           None if bias is None else Parameter(bias.detach(), requires_grad=False))


def quantize_weights(model, fmt, skip=("lm_head",)):
    """Replace every Linear of ``model`` (in place), and every layer offering ``as_linear()``, by
    a QuantizedLinear in format ``fmt``, but those whose name (last part of the path) is in
    ``skip`` and those whose weight another layer shares (a tied embedding). Returns the model.

    >>> import flopcount.runtime as rt
    >>> net = rt.quantize_weights(rt.nn.Sequential(rt.nn.Linear(256, 64)), "int4")
    >>> net[0].weight.dtype, tuple(net[0].scale.shape)
    (flopcount.int4, (64, 2))
    """
    fmt = weight_format(fmt)
    owners: dict = {}
    for _, module in model.named_modules():
        for p in module._parameters.values():
            if p is not None:
                owners[id(p)] = owners.get(id(p), 0) + 1
    for path, module in list(model.named_modules()):
        for name, child in list(module._modules.items()):
            linear = _as_linear(child)
            if linear is None or name in skip or owners.get(id(child.weight), 0) > 1:
                continue
            setattr(module, name, quantize_linear(linear, fmt))
    return model


def _as_linear(module) -> Linear | None:
    """``module`` as a Linear: itself, or what its ``as_linear()`` gives (a layer that is a linear
    one stored another way, such as GPT-2's Conv1D with its weight (in, out)); else None."""
    if type(module) is Linear:
        return module
    convert = getattr(module, "as_linear", None)
    return convert() if callable(convert) else None


__all__ = ["WeightFormat", "weight_format", "quantize_weights", "quantize_linear"]
