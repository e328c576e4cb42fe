"""Parameter initialization as in ``torch.nn.init`` (in place, under no_grad; no-ops on meta)."""

from __future__ import annotations

import math

import numpy as np

from ..dispatch import no_grad
from ..tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "eye_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_",
           "orthogonal_"]


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(t: Tensor) -> tuple[int, int]:
    if t.ndim < 2:
        raise ValueError(f"fan in and fan out need at least 2 dims, got shape {t.shape}")
    receptive = math.prod(t.shape[2:]) if t.ndim > 2 else 1
    return t.shape[1] * receptive, t.shape[0] * receptive


def _fan(t: Tensor, mode: str) -> int:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    return fan_in if mode == "fan_in" else fan_out


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    with no_grad():
        return t.uniform_(a, b)


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    with no_grad():
        return t.normal_(mean, std)


def constant_(t: Tensor, val: float) -> Tensor:
    with no_grad():
        return t.fill_(val)


def zeros_(t: Tensor) -> Tensor:
    return constant_(t, 0.0)


def ones_(t: Tensor) -> Tensor:
    return constant_(t, 1.0)


def eye_(t: Tensor) -> Tensor:
    if t.ndim != 2:
        raise ValueError(f"eye_ needs a 2-d tensor, got shape {t.shape}")
    return t._write(np.eye(*t.shape)) if t.data is not None else t


def xavier_uniform_(t: Tensor, gain: float = 1.0) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(t, -bound, bound)


def xavier_normal_(t: Tensor, gain: float = 1.0) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def kaiming_uniform_(t: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(_fan(t, mode))
    return uniform_(t, -bound, bound)


def kaiming_normal_(t: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    return normal_(t, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(t, mode)))


def trunc_normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0) -> Tensor:
    """Normal values, those outside [a, b] redrawn until none is left."""
    if t.data is None:
        return t
    from ..random import random_array

    values = random_array("cpu", "normal", t.shape, t.dtype, mean, std)
    bad = (values < a) | (values > b)
    while bad.any():
        values[bad] = random_array("cpu", "normal", (int(bad.sum()),), t.dtype, mean, std)
        bad = (values < a) | (values > b)
    return t.copy_(Tensor._make(values, t.shape, t.dtype, _cpu()))


def orthogonal_(t: Tensor, gain: float = 1.0) -> Tensor:
    """A (semi-)orthogonal matrix from the QR decomposition of a normal matrix."""
    if t.data is None:
        return t
    from ..random import random_array

    rows = t.shape[0]
    cols = t.numel() // rows
    flat = random_array("cpu", "normal", (rows, cols), t.dtype)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return t.copy_(Tensor._make((gain * q).reshape(t.shape).astype(t.dtype.np), t.shape, t.dtype, _cpu()))


def _cpu():
    from ..device import CPU

    return CPU
