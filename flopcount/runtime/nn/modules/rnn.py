"""RNN, LSTM, GRU and their cells, as composites of registered ops.

A layer projects the input of every time step with ONE ``linear`` (T·N·in·G·h MACs), then each
step does one ``linear`` of the hidden state (N·h·G·h MACs) and the gate elementwise ops. So the
counters see T·N·(in + h)·G·h MACs per layer and direction, COUNTING.md's RNN row (G = 1, 3, 4
for RNN, GRU, LSTM); bias adds and gate activations show up as the FLOPs of their own ops.

>>> import flopcount.runtime as rt
>>> lstm = rt.nn.LSTM(8, 16, num_layers=2, batch_first=True)
>>> out, (h, c) = lstm(rt.randn(4, 5, 8))
>>> out.shape, h.shape
((4, 5, 16), (2, 4, 16))
"""

from __future__ import annotations

import math
import numbers
import warnings

from ... import dtypes as _dt
from ...errors import ShapeError
from ...factories import empty, zeros
from ...ops.activations import relu, sigmoid
from ...ops.dropout import dropout
from ...ops.elementwise import add, mul, sub, tanh
from ...ops.linalg import linear
from ...ops.movement import cat, chunk, squeeze, stack, transpose, unsqueeze
from ...tensor import Tensor
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# --- one time step -------------------------------------------------------------------------
# ``gi`` is the input projection x·W_ihᵀ + b_ih of this step, computed ahead for all steps.

def _rnn_step(gi, h, w_hh, b_hh, nonlinearity: str):
    """h' = act(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)."""
    pre = add(gi, linear(h, w_hh, b_hh))
    return tanh(pre) if nonlinearity == "tanh" else relu(pre)


def _lstm_step(gi, h, c, w_hh, b_hh):
    """PyTorch's LSTM: gates i, f, g, o in that order along the gate dim."""
    gates = add(gi, linear(h, w_hh, b_hh))
    i, f, g, o = chunk(gates, 4, -1)
    i, f, g, o = sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)
    c = add(mul(f, c), mul(i, g))
    return mul(o, tanh(c)), c


def _gru_step(gi, h, w_hh, b_hh):
    """PyTorch's GRU: gates r, z, n; r multiplies (W_hn h + b_hn), not h alone."""
    gh = linear(h, w_hh, b_hh)
    i_r, i_z, i_n = chunk(gi, 3, -1)
    h_r, h_z, h_n = chunk(gh, 3, -1)
    r = sigmoid(add(i_r, h_r))
    z = sigmoid(add(i_z, h_z))
    n = tanh(add(i_n, mul(r, h_n)))
    # (1 - z)·n + z·h written as ATen's kernel computes it: n + z·(h - n)
    return add(n, mul(z, sub(h, n)))


def _check_dropout(dropout, num_layers: int) -> float:
    if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
        raise ValueError(f"dropout should be a number in range [0, 1] representing the probability "
                         f"of an element being zeroed, got {dropout!r}")
    if dropout > 0 and num_layers == 1:
        warnings.warn(f"dropout option adds dropout after all but last recurrent layer, so non-zero "
                      f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                      f"num_layers={num_layers}", stacklevel=3)
    return float(dropout)


def _uniform_by_hidden_size(module: Module) -> None:
    """PyTorch's init of recurrent layers and cells: every weight and bias U(±1/sqrt(hidden_size))."""
    bound = 1.0 / math.sqrt(module.hidden_size)
    for weight in module.parameters():
        init.uniform_(weight, -bound, bound)


def _check_sizes(input_size, hidden_size) -> None:
    for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
        if value <= 0:
            raise ValueError(f"{name} must be greater than zero, got {value}")


# --- multi-layer recurrent modules -----------------------------------------------------------

class RNNBase(Module):
    """What RNN, LSTM and GRU share: parameters ``weight_ih_l{k}{_reverse}``, ``weight_hh_l{k}``,
    ``bias_ih_l{k}``, ``bias_hh_l{k}`` as in PyTorch, and the loop over layers, directions and
    time steps. Inputs are (L, N, H_in), (N, L, H_in) with ``batch_first``, or unbatched (L, H_in).
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None) -> None:
        super().__init__()
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode!r} (expected one of {sorted(_GATES)})")
        _check_sizes(input_size, hidden_size)
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"num_layers must be greater than zero, got {num_layers!r}")
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
        if proj_size != 0:
            raise ValueError(f"{mode}: proj_size={proj_size} is not supported (only proj_size=0)")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = _check_dropout(dropout, num_layers)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        dtype = dtype or _dt.default_float
        gate_size = _GATES[mode] * hidden_size
        directions = 2 if bidirectional else 1
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else hidden_size * directions
                suffix = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                names = []
                for stem, shape in shapes:
                    name = f"{stem}_l{layer}{suffix}"
                    setattr(self, name, Parameter(empty(*shape, dtype=dtype, device=device)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias uniform in ±1/sqrt(hidden_size), as PyTorch."""
        _uniform_by_hidden_size(self)

    def flatten_parameters(self) -> None:
        """Kept for PyTorch compatibility (cuDNN weight packing); nothing to do here."""

    @property
    def all_weights(self) -> list:
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, name) for name in self._flat_weights_names]

    @property
    def _num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    def _layer_weights(self, layer: int, direction: int) -> tuple:
        """(weight_ih, weight_hh, bias_ih, bias_hh) of one layer and direction (biases may be None)."""
        suffix = "_reverse" if direction == 1 else ""
        names = [f"{stem}_l{layer}{suffix}" for stem in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        return tuple(getattr(self, n) if n in self._parameters else None for n in names)

    # --- input handling ---------------------------------------------------------------------
    def _check_input(self, x) -> bool:
        """Validate the input; True when it is unbatched (L, H_in)."""
        if not isinstance(x, Tensor):
            raise TypeError(f"{type(self).__name__}: expects a Tensor input (PackedSequence is not "
                            f"supported), got {type(x).__name__}")
        if x.ndim not in (2, 3):
            raise ShapeError(f"{type(self).__name__}: expected input to be 2-D or 3-D, got {x.ndim}-D "
                             f"of shape {x.shape}")
        if x.shape[-1] != self.input_size:
            raise ShapeError(f"{type(self).__name__}: input.size(-1) must be equal to input_size. "
                             f"Expected {self.input_size}, got {x.shape[-1]} (input shape {x.shape})")
        weight = self.weight_ih_l0
        if x.dtype is not weight.dtype:
            raise ShapeError(f"{type(self).__name__}: input dtype ({x.dtype.name}) does not match "
                             f"weight dtype ({weight.dtype.name})")
        return x.ndim == 2

    def _initial_state(self, hx, x, unbatched: bool, what: str = "hidden"):
        """hx given (checked and made batched) or zeros: (layers·directions, N, hidden)."""
        batch = x.shape[1]
        expected = (self.num_layers * self._num_directions, batch, self.hidden_size)
        if hx is None:
            return zeros(*expected, dtype=x.dtype, device=x.device)
        if not isinstance(hx, Tensor):
            raise TypeError(f"{type(self).__name__}: {what} state must be a Tensor, got {type(hx).__name__}")
        if unbatched:
            if hx.ndim != 2:
                raise ShapeError(f"{type(self).__name__}: for unbatched 2-D input, {what} state should "
                                 f"also be 2-D but got {hx.ndim}-D of shape {hx.shape}")
            hx = unsqueeze(hx, 1)
        if tuple(hx.shape) != expected:
            raise ShapeError(f"{type(self).__name__}: expected {what} size {expected}, got {tuple(hx.shape)}")
        return hx

    # --- the recurrence ---------------------------------------------------------------------
    def _run(self, x, states: list):
        """Run every layer and direction over time-major ``x`` (T, N, H_in).

        ``states`` holds the initial state tensors (one for RNN/GRU, h and c for LSTM), each
        (layers·directions, N, hidden). Returns the last layer's output and the final states.
        """
        steps = x.shape[0]
        directions = self._num_directions
        finals = [[] for _ in states]
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh = self._layer_weights(layer, direction)
                projected = linear(x, w_ih, b_ih)  # every time step at once
                index = layer * directions + direction
                state = tuple(s[index] for s in states)
                ys = [None] * steps
                order = range(steps) if direction == 0 else reversed(range(steps))
                for t in order:
                    state = self._cell(projected[t], state, w_hh, b_hh)
                    ys[t] = state[0]
                outputs.append(stack(ys, 0))
                for final, s in zip(finals, state):
                    final.append(s)
            x = outputs[0] if directions == 1 else cat(outputs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = dropout(x, self.dropout, training=True)
        return x, [stack(f, 0) for f in finals]

    def _cell(self, gi, state: tuple, w_hh, b_hh) -> tuple:
        """One time step of this kind of layer: the new state tuple (its first entry is h)."""
        raise NotImplementedError

    def forward(self, input, hx=None):
        """Returns (output, h_n) (LSTM, whose state is (h, c), has its own)."""
        out, (h_n,) = self._forward(input, None if hx is None else [hx])
        return out, h_n

    def _forward(self, x, hx_list: list | None):
        """Check and lay out input and states, run the layers, restore the caller's layout."""
        unbatched = self._check_input(x)
        if unbatched:
            x = unsqueeze(x, 1)
        elif self.batch_first:
            x = transpose(x, 0, 1)
        count = 2 if self.mode == "LSTM" else 1
        given = hx_list if hx_list is not None else [None] * count
        names = ("hidden", "cell")
        states = [self._initial_state(h, x, unbatched, names[i]) for i, h in enumerate(given)]
        out, finals = self._run(x, states)
        if unbatched:
            return squeeze(out, 1), [squeeze(f, 1) for f in finals]
        if self.batch_first:
            out = transpose(out, 0, 1)
        return out, finals

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = act(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh), act tanh or relu.

    >>> import flopcount.runtime as rt
    >>> out, h = rt.nn.RNN(3, 5, nonlinearity="relu")(rt.randn(7, 2, 3))
    >>> out.shape, h.shape
    ((7, 2, 5), (1, 2, 5))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity

    def _cell(self, gi, state, w_hh, b_hh):
        return (_rnn_step(gi, state[0], w_hh, b_hh, self.nonlinearity),)


class LSTM(RNNBase):
    """Long short-term memory; ``forward(input, (h_0, c_0))`` returns (output, (h_n, c_n)).

    ``proj_size`` other than 0 is not supported (a ValueError says so).

    >>> import flopcount.runtime as rt
    >>> out, (h, c) = rt.nn.LSTM(3, 5, bidirectional=True)(rt.randn(7, 2, 3))
    >>> out.shape, c.shape
    ((7, 2, 10), (2, 2, 5))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)

    def _cell(self, gi, state, w_hh, b_hh):
        return _lstm_step(gi, state[0], state[1], w_hh, b_hh)

    def forward(self, input, hx=None):
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"LSTM: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
        out, (h_n, c_n) = self._forward(input, None if hx is None else list(hx))
        return out, (h_n, c_n)


class GRU(RNNBase):
    """Gated recurrent unit with PyTorch's exact formula (r applied to W_hn h + b_hn).

    >>> import flopcount.runtime as rt
    >>> out, h = rt.nn.GRU(3, 5, num_layers=2)(rt.randn(7, 2, 3))
    >>> h.shape
    (2, 2, 5)
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)

    def _cell(self, gi, state, w_hh, b_hh):
        return (_gru_step(gi, state[0], w_hh, b_hh),)


# --- cells: one time step ----------------------------------------------------------------------

class RNNCellBase(Module):
    """What the cells share: ``weight_ih`` (G·h, in), ``weight_hh`` (G·h, h), ``bias_ih``,
    ``bias_hh``, uniform in ±1/sqrt(hidden_size); inputs (N, in) or unbatched (in,)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None) -> None:
        super().__init__()
        _check_sizes(input_size, hidden_size)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        dtype = dtype or _dt.default_float
        gate_size = num_chunks * hidden_size
        self.weight_ih = Parameter(empty(gate_size, input_size, dtype=dtype, device=device))
        self.weight_hh = Parameter(empty(gate_size, hidden_size, dtype=dtype, device=device))
        for name in ("bias_ih", "bias_hh"):
            self.register_parameter(name, Parameter(empty(gate_size, dtype=dtype, device=device)) if bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _uniform_by_hidden_size(self)

    def _prepare(self, x, states: list) -> tuple:
        """Check shapes, add the batch dim to unbatched input, fill missing states with zeros."""
        name = type(self).__name__
        if not isinstance(x, Tensor) or x.ndim not in (1, 2):
            shape = getattr(x, "shape", None)
            raise ShapeError(f"{name}: Expected input to be 1D or 2D, got shape {shape}")
        if x.shape[-1] != self.input_size:
            raise ShapeError(f"{name}: input has size {x.shape[-1]} in its last dim (shape {x.shape}), "
                             f"expected input_size={self.input_size}")
        unbatched = x.ndim == 1
        if unbatched:
            x = unsqueeze(x, 0)
        expected = (x.shape[0], self.hidden_size)
        out = []
        for s in states:
            if s is None:
                s = zeros(*expected, dtype=x.dtype, device=x.device)
            elif unbatched:
                if s.ndim != 1:
                    raise ShapeError(f"{name}: for unbatched 1-D input, hx should also be 1-D but got "
                                     f"shape {s.shape}")
                s = unsqueeze(s, 0)
            if tuple(s.shape) != expected:
                raise ShapeError(f"{name}: expected hidden state of shape {expected}, got {tuple(s.shape)}")
            out.append(s)
        gi = linear(x, self.weight_ih, self.bias_ih)
        return gi, out, unbatched

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    """One Elman step: h' = act(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh).

    >>> import flopcount.runtime as rt
    >>> rt.nn.RNNCell(3, 4)(rt.randn(2, 3)).shape
    (2, 4)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        gi, (h,), unbatched = self._prepare(input, [hx])
        h = _rnn_step(gi, h, self.weight_hh, self.bias_hh, self.nonlinearity)
        return squeeze(h, 0) if unbatched else h


class LSTMCell(RNNCellBase):
    """One LSTM step; ``forward(input, (h, c))`` returns (h', c').

    >>> import flopcount.runtime as rt
    >>> h, c = rt.nn.LSTMCell(3, 4)(rt.randn(2, 3))
    >>> c.shape
    (2, 4)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"LSTMCell: hx must be a tuple (h, c), got {type(hx).__name__}")
        gi, (h, c), unbatched = self._prepare(input, [None, None] if hx is None else list(hx))
        h, c = _lstm_step(gi, h, c, self.weight_hh, self.bias_hh)
        return (squeeze(h, 0), squeeze(c, 0)) if unbatched else (h, c)


class GRUCell(RNNCellBase):
    """One GRU step with PyTorch's formula.

    >>> import flopcount.runtime as rt
    >>> rt.nn.GRUCell(3, 4)(rt.randn(3)).shape
    (4,)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        gi, (h,), unbatched = self._prepare(input, [hx])
        h = _gru_step(gi, h, self.weight_hh, self.bias_hh)
        return squeeze(h, 0) if unbatched else h
