"""Activation modules, Softmax, Softmin and LogSoftmax (PyTorch's names and arguments).

Each is a thin wrapper over the functional of the same name in ``ops/activations.py``;
``PReLU`` owns its slopes as the parameter ``weight``.
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...factories import empty
from ...ops import activations as A
from ...ops.elementwise import tanh
from .. import init
from ..parameter import Parameter
from ._classes import layer_class
from .module import Module

__all__ = ["ReLU", "ReLU6", "LeakyReLU", "PReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
           "Hardswish", "Hardsigmoid", "Hardtanh", "Softplus", "LogSigmoid", "Softsign", "Tanhshrink",
           "GLU", "Sigmoid", "Tanh", "Softmax", "Softmin", "LogSoftmax"]


class _Inplace(Module):
    """Activations whose only option is ``inplace`` (accepted; the result is a new tensor)."""

    _functional = None

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._functional(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


ReLU = layer_class(_Inplace, "ReLU", A.relu, """max(x, 0).

    >>> ReLU()(rt.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """)
ReLU6 = layer_class(_Inplace, "ReLU6", A.relu6, "min(max(x, 0), 6).")
SELU = layer_class(_Inplace, "SELU", A.selu, "scale·elu(x, alpha) with the self-normalizing constants.")
SiLU = layer_class(_Inplace, "SiLU", A.silu, "x·sigmoid(x).")
Mish = layer_class(_Inplace, "Mish", A.mish, "x·tanh(softplus(x)).")
Hardswish = layer_class(_Inplace, "Hardswish", A.hardswish, "x·relu6(x + 3) / 6.")
Hardsigmoid = layer_class(_Inplace, "Hardsigmoid", A.hardsigmoid, "relu6(x + 3) / 6.")


class LeakyReLU(Module):
    """x for x > 0, else negative_slope·x."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return A.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class PReLU(Module):
    """leaky_relu with learned slopes: ``weight`` has ``num_parameters`` values (1, or one per
    channel of dim 1), initialized to ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty(num_parameters, dtype=dtype or _dt.default_float, device=device))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return A.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class _AlphaInplace(Module):
    """Activations with an ``alpha`` and ``inplace`` (accepted; the result is a new tensor)."""

    _functional = None

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return type(self)._functional(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


ELU = layer_class(_AlphaInplace, "ELU", A.elu, "x for x > 0, else alpha·(exp(x) − 1).")
CELU = layer_class(_AlphaInplace, "CELU", A.celu, "max(0, x) + min(0, alpha·(exp(x/alpha) − 1)).")


class GELU(Module):
    """x·Φ(x); ``approximate='tanh'`` uses the tanh approximation."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return A.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Hardtanh(Module):
    """x clamped to [min_val, max_val]."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val {min_val} cannot be greater than max_val {max_val}")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return A.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    """log(1 + exp(beta·x)) / beta, linear where beta·x > threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return A.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class _Elementwise(Module):
    """Activations without options."""

    _functional = None

    def forward(self, input):
        return type(self)._functional(input)


LogSigmoid = layer_class(_Elementwise, "LogSigmoid", A.logsigmoid, "log(sigmoid(x)).")
Softsign = layer_class(_Elementwise, "Softsign", A.softsign, "x / (1 + |x|).")
Tanhshrink = layer_class(_Elementwise, "Tanhshrink", A.tanhshrink, "x − tanh(x).")
Sigmoid = layer_class(_Elementwise, "Sigmoid", A.sigmoid, "1 / (1 + exp(−x)).")
Tanh = layer_class(_Elementwise, "Tanh", tanh, "tanh(x).")


class GLU(Module):
    """a·sigmoid(b) for the two halves a, b of the input along ``dim``."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return A.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class _SoftmaxBase(Module):
    _functional = None

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return type(self)._functional(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


Softmax = layer_class(_SoftmaxBase, "Softmax", A.softmax,
                      "exp(x) / sum(exp(x)) along ``dim`` (PyTorch's legacy implicit dim when None).")
Softmin = layer_class(_SoftmaxBase, "Softmin", A.softmin, "softmax(−x) along ``dim``.")
LogSoftmax = layer_class(_SoftmaxBase, "LogSoftmax", A.log_softmax, "log(softmax(x)) along ``dim``.")
