"""Keras 3's built-in layers as flopcount modules, built from a layer's saved config.

Tensors stay channels-last as Keras takes them (NHWC images, features on the last axis); a
convolution or a batch norm moves the channels to axis 1 for the kernel and back. Parameters are
kept in PyTorch's layout and names (a Conv2D kernel (kh, kw, in, out) becomes ``weight``
(out, in, kh, kw), Dense's (in, out) ``weight`` (out, in)) so the kernels run as for any model;
``keras_weights`` lists, in the order Keras saves a layer's variables, the parameter each
variable fills and how its array is rearranged. A BatchNormalization's moving mean and variance
are weights in Keras (non-trainable), so they are frozen parameters here, not buffers: the
parameter count is ``model.count_params()``.

    layer = build("Dense", {"units": 4, "activation": "relu"}, input_shape=(None, 8))
    layer.weight.shape      # (4, 8) on the meta device
"""

from __future__ import annotations

import math

import numpy as np

from .. import runtime as rt
from ..runtime import errors
from ..runtime.nn import functional as F
from ..runtime.nn.modules.module import Module
from ..runtime.nn.parameter import Parameter

# Keras activation name -> function of a tensor (Keras' gelu is the exact one unless approximate)
ACTIVATIONS = {
    "linear": None, None: None,
    "relu": F.relu, "relu6": F.relu6, "gelu": F.gelu, "sigmoid": F.sigmoid, "tanh": F.tanh,
    "softmax": lambda x: F.softmax(x, dim=-1), "swish": F.silu, "silu": F.silu, "elu": F.elu,
    "softplus": F.softplus, "hard_swish": F.hardswish, "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
}


def activation(config: dict, key: str = "activation"):
    """The function a layer's ``activation`` names (None: linear); any other is refused."""
    name = config.get(key, "linear")
    if isinstance(name, dict) and name.get("module") == "keras.activations":
        name = name.get("config") if isinstance(name.get("config"), str) else name.get("class_name")
    if not isinstance(name, (str, type(None))) or name not in ACTIVATIONS:
        shown = name.get("class_name") if isinstance(name, dict) else name
        raise errors.UnsupportedOpError(f"activation {shown!r} is not one flopcount knows (it knows "
                                        f"{', '.join(sorted(k for k in ACTIVATIONS if k))})")
    return ACTIVATIONS[name]


def _weight(*shape, dtype=None) -> Parameter:
    with rt.meta():
        return Parameter(rt.empty(shape, dtype=dtype or rt.float32))


def _known(shape) -> tuple:
    """The layer's input shape, which a layer with weights needs to size them."""
    if shape is None:
        raise ValueError("no input shape (the layer was saved unbuilt)")
    return shape


def _normalized_axes(config: dict, input_shape: tuple) -> list:
    """The axes a normalization layer's ``axis`` names (an int or a list), non-negative and sorted."""
    rank = len(_known(input_shape))
    axes = config.get("axis", -1)
    return sorted(a % rank for a in (axes if isinstance(axes, list) else [axes]))


def _require_channels_last(kind: str, config: dict, accepted: tuple = ("channels_last",)) -> None:
    """Refuse a layer whose ``data_format`` is not one of ``accepted``: the layers here read
    channels-last tensors (pooling and padding layers also save None for the default)."""
    if config.get("data_format", "channels_last") not in accepted:
        raise errors.UnsupportedOpError(f"{kind} with data_format {config.get('data_format')!r}: "
                                        f"flopcount reads channels_last Keras models")


def _pair(value) -> tuple:
    return tuple(value) if isinstance(value, (list, tuple)) else (value, value)


def same_padding(size: int, kernel: int, stride: int, dilation: int = 1) -> tuple:
    """(before, after) Keras' ``padding="same"`` adds on one spatial axis: the output is
    ceil(size / stride) long and the odd pixel goes after, as TensorFlow does.

    >>> same_padding(8, 3, 2)
    (0, 1)
    """
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def _to_channels_first(x):
    return rt.permute(x, (0, x.ndim - 1) + tuple(range(1, x.ndim - 1)))


def _to_channels_last(x):
    return rt.permute(x, (0,) + tuple(range(2, x.ndim)) + (1,))


class KerasLayer(Module):
    """A Keras layer: ``keras_weights`` is [(parameter name, rearrange(array) -> array, where
    Keras saves it)], the place relative to the layer's group: ``vars/0``, ``vars/1``... in the
    order of the layer's variables, ``query_dense/vars/0`` for a sublayer's."""

    keras_class = ""

    def __init__(self):
        super().__init__()
        self.keras_weights: list = []

    def _add(self, name: str, shape: tuple, rearrange=lambda a: a, trainable: bool = True, dtype=None,
             at: str = "vars", wanted: bool = True) -> None:
        if not wanted:   # a weight the config leaves out (use_bias, center, scale): the attribute is None
            self.register_parameter(name, None)
            return
        param = _weight(*shape, dtype=dtype)
        param.requires_grad = trainable and param.dtype.is_floating_point
        setattr(self, name, param)
        index = sum(1 for *_, place in self.keras_weights if place.rpartition("/")[0] == at)
        self.keras_weights.append((name, rearrange, f"{at}/{index}"))

    def extra_repr(self) -> str:
        return self.keras_class


class Dense(KerasLayer):
    keras_class = "Dense"

    def __init__(self, config: dict, input_shape: tuple):
        super().__init__()
        units, fan_in = int(config["units"]), int(_known(input_shape)[-1])
        self._add("weight", (units, fan_in), lambda a: a.T)   # Keras' kernel is (in, out)
        self._add("bias", (units,), wanted=config.get("use_bias", True))
        self.act = activation(config)

    def forward(self, x):
        y = F.linear(x, self.weight, self.bias)
        return y if self.act is None else self.act(y)


class _Conv(KerasLayer):
    """Conv2D, DepthwiseConv2D and SeparableConv2D (a depthwise then a 1x1 convolution)."""

    def __init__(self, kind: str, config: dict, input_shape: tuple):
        super().__init__()
        _require_channels_last(kind, config)
        kh, kw = _pair(config["kernel_size"])
        self.stride, self.dilation = _pair(config.get("strides", 1)), _pair(config.get("dilation_rate", 1))
        self.padding = config.get("padding", "valid")
        if self.padding not in ("valid", "same"):
            raise errors.UnsupportedOpError(f"{kind} padding {self.padding!r} (flopcount knows 'valid' and 'same')")
        channels = int(_known(input_shape)[-1])
        if kind == "Conv2D":
            self.groups, filters = int(config.get("groups", 1)), int(config["filters"])
            # (kh, kw, in / groups, out) -> (out, in / groups, kh, kw)
            self._add("weight", (filters, channels // self.groups, kh, kw), lambda a: a.transpose(3, 2, 0, 1))
        else:
            multiplier, self.groups = int(config.get("depth_multiplier", 1)), channels
            filters = channels * multiplier
            # (kh, kw, in, multiplier) -> (in * multiplier, 1, kh, kw): output channel c * multiplier + m
            self._add("weight", (filters, 1, kh, kw),
                      lambda a: a.reshape(a.shape[0], a.shape[1], -1, 1).transpose(2, 3, 0, 1))
        self.register_parameter("pointwise", None)
        if kind == "SeparableConv2D":
            filters = int(config["filters"])
            # (1, 1, in * multiplier, out) -> (out, in * multiplier, 1, 1)
            self._add("pointwise", (filters, channels * multiplier, 1, 1), lambda a: a.transpose(3, 2, 0, 1))
        self._add("bias", (filters,), wanted=config.get("use_bias", True))
        self.act = activation(config)

    def forward(self, x):
        x = _to_channels_first(x)
        padding = 0
        if self.padding == "same":
            pads = [same_padding(x.shape[2 + i], self.weight.shape[2 + i], self.stride[i], self.dilation[i])
                    for i in range(2)]
            if all(before == after for before, after in pads):
                padding = tuple(before for before, _ in pads)
            else:
                x = F.pad(x, (pads[1][0], pads[1][1], pads[0][0], pads[0][1]))
        if self.pointwise is None:
            y = F.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)
        else:
            y = F.conv2d(x, self.weight, None, self.stride, padding, self.dilation, self.groups)
            y = F.conv2d(y, self.pointwise, self.bias)
        y = _to_channels_last(y)
        return y if self.act is None else self.act(y)


class Conv1D(KerasLayer):
    """Conv1D on (batch, length, channels): kernel (k, in / groups, out) -> weight (out, in / groups,
    k); ``padding="causal"`` pads (k - 1) * dilation before."""

    keras_class = "Conv1D"

    def __init__(self, config: dict, input_shape: tuple):
        super().__init__()
        _require_channels_last("Conv1D", config)
        size = config["kernel_size"]
        self.kernel = int(size[0] if isinstance(size, list) else size)
        self.stride, self.dilation = (int(_pair(config.get(k, 1))[0]) for k in ("strides", "dilation_rate"))
        self.padding = config.get("padding", "valid")
        if self.padding not in ("valid", "same", "causal"):
            raise errors.UnsupportedOpError(f"Conv1D padding {self.padding!r} (flopcount knows 'valid', 'same' "
                                            f"and 'causal')")
        channels, filters = int(_known(input_shape)[-1]), int(config["filters"])
        self.groups = int(config.get("groups", 1))
        self._add("weight", (filters, channels // self.groups, self.kernel), lambda a: a.transpose(2, 1, 0))
        self._add("bias", (filters,), wanted=config.get("use_bias", True))
        self.act = activation(config)

    def forward(self, x):
        x = rt.swapaxes(x, 1, 2)
        if self.padding == "causal":
            x = F.pad(x, ((self.kernel - 1) * self.dilation, 0))
        elif self.padding == "same":
            x = F.pad(x, same_padding(x.shape[2], self.kernel, self.stride, self.dilation))
        y = rt.swapaxes(F.conv1d(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups), 1, 2)
        return y if self.act is None else self.act(y)


class _Pooling(KerasLayer):
    """MaxPooling2D and AveragePooling2D (an average over the window's pixels inside the image,
    as Keras does with ``padding="same"``)."""

    def __init__(self, kind: str, config: dict, input_shape: tuple):
        super().__init__()
        _require_channels_last(kind, config, (None, "channels_last"))
        self.size = _pair(config.get("pool_size", 2))
        self.stride = _pair(config.get("strides") or self.size)
        self.padding = config.get("padding", "valid")
        if self.padding not in ("valid", "same"):
            raise errors.UnsupportedOpError(f"{kind} padding {self.padding!r} (flopcount knows 'valid' and 'same')")

    def forward(self, x):
        x = _to_channels_first(x)
        pads = [(0, 0), (0, 0)]
        if self.padding == "same":
            pads = [same_padding(x.shape[2 + i], self.size[i], self.stride[i]) for i in range(2)]
        flat = (pads[1][0], pads[1][1], pads[0][0], pads[0][1])
        if self.keras_class == "MaxPooling2D":
            if any(flat):
                x = F.pad(x, flat, value=-math.inf)
            y = F.max_pool2d(x, self.size, self.stride)
        else:
            y = F.avg_pool2d(F.pad(x, flat) if any(flat) else x, self.size, self.stride)
            if any(flat):   # the padded zeros are not averaged: scale by window size / pixels inside
                y = y * self._inside_scale(x.shape[2:], pads, y.shape[2:], x)
        return _to_channels_last(y)

    def _inside_scale(self, size, pads, out, like):
        scale = np.ones(out, dtype=np.float64)
        for axis in range(2):
            start = np.arange(out[axis]) * self.stride[axis] - pads[axis][0]
            inside = np.minimum(start + self.size[axis], size[axis]) - np.maximum(start, 0)
            shape = [1, 1]
            shape[axis] = out[axis]
            scale = scale * (self.size[axis] / inside).reshape(shape)
        return rt.tensor(scale, dtype=like.dtype, device=like.device)


class _GlobalPooling(KerasLayer):
    def __init__(self, kind: str, config: dict, input_shape: tuple):
        super().__init__()
        self.keepdims = bool(config.get("keepdims", False))

    def forward(self, x):
        reduce = rt.mean if self.keras_class.startswith("GlobalAverage") else rt.amax
        axes = (1,) if self.keras_class.endswith("1D") else (1, 2)   # the length, or height and width
        return reduce(x, dim=axes, keepdim=self.keepdims)


class BatchNormalization(KerasLayer):
    keras_class = "BatchNormalization"

    def __init__(self, config: dict, input_shape: tuple):
        super().__init__()
        axes = _normalized_axes(config, input_shape)
        if len(axes) != 1:
            raise errors.UnsupportedOpError(f"BatchNormalization over axes {config.get('axis')}: "
                                            f"flopcount knows one axis")
        self.axis, self.eps = axes[0], float(config.get("epsilon", 1e-3))
        channels = int(input_shape[self.axis])
        self._add("weight", (channels,), wanted=config.get("scale", True))
        self._add("bias", (channels,), wanted=config.get("center", True))
        self._add("running_mean", (channels,), trainable=False)
        self._add("running_var", (channels,), trainable=False)

    def forward(self, x):
        moved = self.axis != 1
        if moved:
            x = rt.swapaxes(x, 1, self.axis)
        y = F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, eps=self.eps)
        return rt.swapaxes(y, 1, self.axis) if moved else y


class LayerNormalization(KerasLayer):
    keras_class = "LayerNormalization"

    def __init__(self, config: dict, input_shape: tuple):
        super().__init__()
        rank = len(_known(input_shape))
        axes = _normalized_axes(config, input_shape)
        if axes != list(range(rank - len(axes), rank)):
            raise errors.UnsupportedOpError(f"LayerNormalization over axes {axes}: flopcount knows the last ones")
        self.shape, self.eps = tuple(int(input_shape[a]) for a in axes), float(config.get("epsilon", 1e-3))
        self._add("weight", self.shape, wanted=config.get("scale", True))
        self._add("bias", self.shape, wanted=config.get("center", True))

    def forward(self, x):
        return F.layer_norm(x, self.shape, self.weight, self.bias, eps=self.eps)


class ZeroPadding2D(KerasLayer):
    keras_class = "ZeroPadding2D"

    def __init__(self, config: dict, input_shape: tuple):
        super().__init__()
        _require_channels_last("ZeroPadding2D", config, (None, "channels_last"))
        padding = config.get("padding", 1)
        (top, bottom), (left, right) = [_pair(p) for p in _pair(padding)]
        self.pads = tuple(int(p) for p in (0, 0, left, right, top, bottom))   # C, W, H from the last axis

    def forward(self, x):
        return F.pad(x, self.pads)


class Rescaling(KerasLayer):
    """x * scale + offset (scale and offset numbers, or one per channel)."""

    keras_class = "Rescaling"

    def __init__(self, config: dict, input_shape: tuple):
        super().__init__()
        self.scale, self.offset = config.get("scale", 1.0), config.get("offset", 0.0)
        for value in (self.scale, self.offset):
            if not isinstance(value, (int, float, list)) or isinstance(value, bool):
                raise ValueError(f"Rescaling scale/offset {value!r} is not a number or a list")

    def forward(self, x):
        scale, offset = (v if isinstance(v, (int, float)) else rt.tensor(v, dtype=x.dtype, device=x.device)
                         for v in (self.scale, self.offset))
        return x * scale + offset


class Normalization(KerasLayer):
    """(x - mean) / max(sqrt(variance), 1e-7), the statistics saved as weights (``adapt``'s)
    along with the count of samples they were adapted on."""

    keras_class = "Normalization"

    def __init__(self, config: dict, input_shape: tuple):
        super().__init__()
        rank = len(_known(input_shape))
        axes = _normalized_axes(config, input_shape)
        if config.get("mean") is not None or config.get("invert"):
            raise errors.UnsupportedOpError("Normalization with its mean in the config or inverted: flopcount "
                                            "knows the adapted one")
        self.broadcast = tuple(int(input_shape[d]) if d in axes else 1 for d in range(1, rank))
        kept = tuple(int(input_shape[d]) for d in axes)
        self._add("mean", kept, trainable=False)
        self._add("variance", kept, trainable=False)
        self._add("count", (), trainable=False, dtype=rt.int64)

    def forward(self, x):
        mean, variance = rt.reshape(self.mean, self.broadcast), rt.reshape(self.variance, self.broadcast)
        return (x - mean) / rt.clamp(rt.sqrt(variance), min=1e-7)


class MultiHeadAttention(KerasLayer):
    """Keras' MultiHeadAttention over the sequence axis of (batch, length, features) inputs:
    query, key and value projections (EinsumDense kernels (features, heads, dim) kept as
    Linear weights (heads * dim, features)), scaled dot-product attention, the output
    projection."""

    keras_class = "MultiHeadAttention"
    _SUBLAYERS = ("query", "key", "value")

    def __init__(self, config: dict, shapes: dict):
        super().__init__()
        if not isinstance(shapes, dict) or "query_shape" not in shapes or "value_shape" not in shapes:
            raise ValueError("no query and value shapes (the layer was saved unbuilt)")
        query, value = shapes["query_shape"], shapes["value_shape"]
        key = shapes.get("key_shape") or value
        if len(query) != 3 or config.get("attention_axes") not in (None, [1], 1, [-2]):
            raise errors.UnsupportedOpError(f"MultiHeadAttention over axes {config.get('attention_axes')} of "
                                            f"rank-{len(query)} inputs: flopcount knows (batch, length, features)")
        if config.get("use_gate") or config.get("sliding_window") is not None:
            raise errors.UnsupportedOpError("MultiHeadAttention with a gate or a sliding window is not rebuilt yet")
        self.heads, self.key_dim = int(config["num_heads"]), int(config["key_dim"])
        self.value_dim = int(config.get("value_dim") or self.key_dim)
        out = config.get("output_shape") or query[-1]
        out = out[-1] if isinstance(out, list) else out
        if isinstance(config.get("output_shape"), list) and len(config["output_shape"]) != 1:
            raise errors.UnsupportedOpError(f"MultiHeadAttention output_shape {config['output_shape']}: flopcount "
                                            f"knows one feature axis")
        bias = config.get("use_bias", True)
        for name, features, dim in (("query", query[-1], self.key_dim), ("key", key[-1], self.key_dim),
                                    ("value", value[-1], self.value_dim)):
            # (features, heads, dim) -> (heads * dim, features)
            self._add(f"{name}_weight", (self.heads * dim, int(features)),
                      lambda a: a.reshape(a.shape[0], -1).T, at=f"{name}_dense/vars")
            self._add(f"{name}_bias", (self.heads * dim,), lambda a: a.reshape(-1), at=f"{name}_dense/vars",
                      wanted=bias)
        # (heads, value_dim, out) -> (out, heads * value_dim)
        self._add("out_weight", (int(out), self.heads * self.value_dim), lambda a: a.reshape(-1, a.shape[-1]).T,
                  at="output_dense/vars")
        self._add("out_bias", (int(out),), at="output_dense/vars", wanted=bias)

    def _heads(self, x, name: str, dim: int):
        y = F.linear(x, getattr(self, f"{name}_weight"), getattr(self, f"{name}_bias"))
        return rt.swapaxes(rt.reshape(y, (y.shape[0], y.shape[1], self.heads, dim)), 1, 2)

    def forward(self, query, value, key=None, use_causal_mask=False, attention_mask=None,
                return_attention_scores=False, **ignored):
        if attention_mask is not None or return_attention_scores:
            raise errors.UnsupportedOpError("MultiHeadAttention with an attention_mask or returning its scores "
                                            "is not rebuilt yet")
        q = self._heads(query, "query", self.key_dim)
        k = self._heads(value if key is None else key, "key", self.key_dim)
        v = self._heads(value, "value", self.value_dim)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=bool(use_causal_mask))
        y = rt.reshape(rt.swapaxes(y, 1, 2), (y.shape[0], y.shape[2], self.heads * self.value_dim))
        return F.linear(y, self.out_weight, self.out_bias)


class Embedding(KerasLayer):
    keras_class = "Embedding"

    def __init__(self, config: dict, input_shape: tuple):
        super().__init__()
        self.vocabulary = int(config["input_dim"])
        self._add("weight", (self.vocabulary, int(config["output_dim"])))

    def forward(self, ids):
        return F.embedding(ids, self.weight)


class _Shape(KerasLayer):
    """Flatten and Reshape: the batch axis kept, the rest in Keras' (channels-last) order."""

    def __init__(self, kind: str, config: dict, input_shape: tuple):
        super().__init__()
        self.target = (-1,) if kind == "Flatten" else tuple(int(d) for d in config["target_shape"])

    def forward(self, x):
        return rt.reshape(x, (x.shape[0],) + self.target)


class Dropout(KerasLayer):
    keras_class = "Dropout"

    def __init__(self, config: dict, input_shape: tuple):
        super().__init__()
        self.rate = float(config.get("rate", 0.0))

    def forward(self, x):
        return F.dropout(x, self.rate, self.training) if self.training and self.rate else x


class _Activation(KerasLayer):
    """Activation, ReLU and Softmax layers."""

    def __init__(self, kind: str, config: dict, input_shape: tuple):
        super().__init__()
        if kind == "Softmax":
            axis = config.get("axis", -1)
            self.act = lambda x: F.softmax(x, dim=axis)
        elif kind == "ReLU":
            if config.get("negative_slope") or config.get("threshold") or config.get("max_value") not in (None, 6.0):
                raise errors.UnsupportedOpError("ReLU with a negative slope or threshold: flopcount knows relu and relu6")
            self.act = F.relu6 if config.get("max_value") == 6.0 else F.relu
        else:
            self.act = activation(config)

    def forward(self, x):
        return x if self.act is None else self.act(x)


class _Merge(KerasLayer):
    """Add, Subtract, Multiply, Average, Maximum, Minimum and Concatenate of a list of tensors."""

    def __init__(self, kind: str, config: dict, input_shape: tuple):
        super().__init__()
        self.axis = int(config.get("axis", -1))

    def forward(self, tensors):
        if self.keras_class == "Concatenate":
            return rt.cat(list(tensors), dim=self.axis)
        if self.keras_class == "Subtract":
            return tensors[0] - tensors[1]
        out = tensors[0]
        for t in tensors[1:]:
            if self.keras_class in ("Add", "Average"):
                out = out + t
            elif self.keras_class == "Multiply":
                out = out * t
            else:
                out = (rt.maximum if self.keras_class == "Maximum" else rt.minimum)(out, t)
        return out * (1.0 / len(tensors)) if self.keras_class == "Average" else out


def _kinded(base, *kinds: str) -> dict:
    """{kind: builder} with one subclass of ``base`` per Keras class, named as Keras names it (the
    type column of a report then reads like ``model.summary()``); defined here by name, so the
    modules pickle and copy as any other."""
    table = {}
    for kind in kinds:
        cls = type(kind, (base,), {"keras_class": kind, "__module__": __name__, "__qualname__": kind})
        globals()[kind] = cls
        table[kind] = (lambda cls: lambda kind, config, shape: cls(kind, config, shape))(cls)
    return table


def _plain(cls):
    return lambda kind, config, shape: cls(config, shape)


# Keras class name -> builder(class name, config, input shape with None batch) -> KerasLayer
LAYERS = {
    "Dense": _plain(Dense), "BatchNormalization": _plain(BatchNormalization),
    "LayerNormalization": _plain(LayerNormalization), "Embedding": _plain(Embedding), "Dropout": _plain(Dropout),
    "MultiHeadAttention": _plain(MultiHeadAttention), "Conv1D": _plain(Conv1D), "ZeroPadding2D": _plain(ZeroPadding2D), "Rescaling": _plain(Rescaling), "Normalization": _plain(Normalization),
    **_kinded(_Conv, "Conv2D", "DepthwiseConv2D", "SeparableConv2D"),
    **_kinded(_Pooling, "MaxPooling2D", "AveragePooling2D"),
    **_kinded(_GlobalPooling, "GlobalAveragePooling2D", "GlobalMaxPooling2D", "GlobalAveragePooling1D",
              "GlobalMaxPooling1D"),
    **_kinded(_Shape, "Flatten", "Reshape"),
    **_kinded(_Activation, "Activation", "ReLU", "Softmax"),
    **_kinded(_Merge, "Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate"),
}


def build(kind: str, config: dict, input_shape: tuple) -> KerasLayer:
    """The module of a Keras layer of class ``kind`` (a key of LAYERS) from its config."""
    return LAYERS[kind](kind, config, input_shape)


__all__ = ["LAYERS", "ACTIVATIONS", "KerasLayer", "Dense", "BatchNormalization", "LayerNormalization", "Embedding",
           "Dropout", "ZeroPadding2D", "Rescaling", "Normalization",
           "MultiHeadAttention", "Conv1D", "build", "activation", "same_padding"]
