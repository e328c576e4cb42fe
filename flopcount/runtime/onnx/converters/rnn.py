"""Recurrent layers: RNN, GRU and LSTM in every direction, with ONNX's activation lists,
``clip``, peepholes, ``input_forget``, ``linear_before_reset``, ``sequence_lens`` and both layouts.

Each is unrolled over the sequence: the input projection of all steps is one ``linear``, then
every step's recurrent projection is a ``linear`` of the hidden state, and the gates are
elementwise ops, so the count is COUNTING.md's per step and layer, N·(in + h)·G·h MACs.
Sequences shorter than the input (``sequence_lens``) keep their last state and give zeros past
their end; a reverse pass reverses each sequence within its own length.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...ops import activations as act
from ...ops import elementwise as ew
from ...ops import indexing, linalg, movement
from ._base import constant, converter, is_const

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
# activations that take alpha (and beta) from activation_alpha / activation_beta, and defaults
_PARAMETERS = {"affine": (1.0, 0.0), "leakyrelu": (0.01, None), "thresholdedrelu": (1.0, None),
               "scaledtanh": (1.0, 1.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None)}


def _activation(ctx, name: str, alphas: list, betas: list):
    """The activation ``name`` as a function of a tensor, taking its alpha/beta from the lists."""
    key = name.lower()
    alpha = beta = None
    if key in _PARAMETERS:
        alpha, beta = _PARAMETERS[key]
        alpha = alphas.pop(0) if alphas else alpha
        if beta is not None:
            beta = betas.pop(0) if betas else beta
    table = {
        "sigmoid": act.sigmoid, "tanh": ew.tanh, "relu": act.relu, "softsign": act.softsign,
        "softplus": act.softplus,
        "affine": lambda x: ew.add(ew.mul(x, alpha), beta),
        "leakyrelu": lambda x: act.leaky_relu(x, alpha),
        "thresholdedrelu": lambda x: ew.where(ew.gt(x, alpha), x, 0.0),
        "scaledtanh": lambda x: ew.mul(ew.tanh(ew.mul(x, beta)), alpha),
        "hardsigmoid": lambda x: ew.clamp(ew.add(ew.mul(x, alpha), beta), 0.0, 1.0),
        "elu": lambda x: act.elu(x, alpha),
    }
    if key not in table:
        raise ctx.unsupported(f"activation {name!r} is not one of {sorted(table)}")
    return table[key]


class _Spec:
    """What one direction of a recurrent node needs: its weights, biases and activations."""

    def __init__(self, ctx, d: int, w, r, b, p, hidden: int, gates: int, functions: list):
        self.w = indexing.getitem(w, (d,))          # (G·H, in)
        self.r = indexing.getitem(r, (d,))          # (G·H, H)
        self.wb = self.rb = None
        if b is not None:
            both = indexing.getitem(b, (d,))
            self.wb = indexing.getitem(both, (slice(0, gates * hidden),))
            self.rb = indexing.getitem(both, (slice(gates * hidden, 2 * gates * hidden),))
        self.p = None if p is None else indexing.getitem(p, (d,))
        self.hidden, self.functions = hidden, functions
        self.clip = ctx.attr("clip")


def _split(t, parts: int, hidden: int) -> list:
    return [indexing.getitem(t, (Ellipsis, slice(k * hidden, (k + 1) * hidden))) for k in range(parts)]


def _clipped(x, clip):
    return x if clip is None else ew.clamp(x, -float(clip), float(clip))


def _rnn_step(ctx, s: _Spec, x_proj, h, c):
    f = s.functions[0]
    pre = ew.add(x_proj, linalg.linear(h, s.r, s.rb))
    return f(_clipped(pre, s.clip)), None


def _gru_step(ctx, s: _Spec, x_proj, h, c):
    f, g = s.functions
    xz, xr, xh = _split(x_proj, 3, s.hidden)
    rw = [indexing.getitem(s.r, (slice(k * s.hidden, (k + 1) * s.hidden),)) for k in range(3)]
    rb = [None] * 3 if s.rb is None else _split(s.rb, 3, s.hidden)
    z = f(_clipped(ew.add(xz, linalg.linear(h, rw[0], rb[0])), s.clip))
    r = f(_clipped(ew.add(xr, linalg.linear(h, rw[1], rb[1])), s.clip))
    if ctx.attr("linear_before_reset", 0):
        candidate = ew.add(xh, ew.mul(r, linalg.linear(h, rw[2], rb[2])))
    else:
        candidate = ew.add(xh, linalg.linear(ew.mul(r, h), rw[2], rb[2]))
    hh = g(_clipped(candidate, s.clip))
    return ew.add(ew.mul(ew.sub(1.0, z), hh), ew.mul(z, h)), None


def _lstm_step(ctx, s: _Spec, x_proj, h, c):
    f, g, hf = s.functions
    pre = ew.add(x_proj, linalg.linear(h, s.r, s.rb))
    gi, go, gf, gc = _split(pre, 4, s.hidden)
    po = None
    if s.p is not None:
        pi, po, pf = _split(s.p, 3, s.hidden)
        gi, gf = ew.add(gi, ew.mul(pi, c)), ew.add(gf, ew.mul(pf, c))
    i = f(_clipped(gi, s.clip))
    forget = ew.sub(1.0, i) if ctx.attr("input_forget", 0) else f(_clipped(gf, s.clip))
    cell = ew.add(ew.mul(forget, c), ew.mul(i, g(_clipped(gc, s.clip))))
    if po is not None:
        go = ew.add(go, ew.mul(po, cell))
    o = f(_clipped(go, s.clip))
    return ew.mul(o, hf(cell)), cell


_STEPS = {"RNN": _rnn_step, "GRU": _gru_step, "LSTM": _lstm_step}


def _reverse_within(ctx, x, lengths):
    """Each sequence b of x (T, N, ...) reversed within its first lengths[b] steps."""
    if lengths is None:
        return movement.flip(x, 0)
    steps = x.shape[0]
    t = constant(np.arange(steps, dtype=np.int64).reshape((steps, 1) + (1,) * (x.ndim - 2)))
    n = movement.reshape(lengths, (1, -1) + (1,) * (x.ndim - 2))
    source = ew.where(ew.lt(t, n), ew.sub(ew.sub(n, 1), t), t)
    return indexing.gather(x, 0, movement.expand(source, x.shape))


def _direction(ctx, s: _Spec, x, h, c, lengths, reverse: bool):
    """One direction over the whole sequence: (outputs (T, N, H), last h, last c)."""
    steps = x.shape[0]
    if reverse:
        x = _reverse_within(ctx, x, lengths)
    projected = linalg.linear(x, s.w, s.wb)  # every step's input projection at once
    outputs = []
    for t in range(steps):
        h_new, c_new = _STEPS[ctx.op_type](ctx, s, indexing.getitem(projected, (t,)), h, c)
        if lengths is not None:  # past its length a sequence keeps its state and outputs zeros
            alive = movement.reshape(ew.lt(constant(np.array(t, np.int64)), lengths), (-1, 1))
            h_new = ew.where(alive, h_new, h)
            c_new = None if c is None else ew.where(alive, c_new, c)
            outputs.append(ew.where(alive, h_new, constant(np.array(0, h_new.dtype.np))))
        else:
            outputs.append(h_new)
        h, c = h_new, c_new
    y = movement.stack(outputs, 0)
    if reverse:
        y = _reverse_within(ctx, y, lengths)
    return y, h, c


@converter("RNN", "GRU", "LSTM")
def recurrent(ctx, x, w, r, b=None, lengths=None, h0=None, c0=None, p=None):
    gates = _GATES[ctx.op_type]
    hidden = int(ctx.attr("hidden_size") or r.shape[-1])
    direction = ctx.attr("direction", "forward")
    directions = 2 if direction == "bidirectional" else 1
    batch_first = bool(ctx.attr("layout", 0))
    if batch_first:
        x = movement.transpose(x, 0, 1)
        h0 = None if h0 is None else movement.transpose(h0, 0, 1)
        c0 = None if c0 is None else movement.transpose(c0, 0, 1)
    batch = x.shape[1]
    if lengths is not None:
        lengths = ew.cast(lengths, _dt.int64)
        if is_const(lengths) and all(int(n) == x.shape[0] for n in ctx.const(lengths, "input 'sequence_lens'")):
            lengths = None  # every sequence is full: no masking
    names = list(ctx.attr("activations") or _DEFAULT_ACTIVATIONS[ctx.op_type] * directions)
    per = len(names) // directions
    alphas, betas = list(ctx.attr("activation_alpha") or []), list(ctx.attr("activation_beta") or [])
    zeros = constant(np.zeros((batch, hidden), dtype=x.dtype.np))
    ys, hs, cs = [], [], []
    for d in range(directions):
        functions = [_activation(ctx, n, alphas, betas) for n in names[d * per:(d + 1) * per]]
        spec = _Spec(ctx, d, w, r, b, p, hidden, gates, functions)
        h = zeros if h0 is None else indexing.getitem(h0, (d,))
        c = None
        if ctx.op_type == "LSTM":
            c = zeros if c0 is None else indexing.getitem(c0, (d,))
        reverse = direction == "reverse" or d == 1
        y, h, c = _direction(ctx, spec, x, h, c, lengths, reverse)
        ys.append(y)
        hs.append(h)
        cs.append(c)
    y = movement.stack(ys, 1)                   # (T, D, N, H)
    y_h = movement.stack(hs, 0)                 # (D, N, H)
    if batch_first:
        y = movement.permute(y, (2, 0, 1, 3))   # (N, T, D, H)
        y_h = movement.transpose(y_h, 0, 1)
    outs = [y, y_h]
    if ctx.op_type == "LSTM":
        y_c = movement.stack(cs, 0)
        outs.append(movement.transpose(y_c, 0, 1) if batch_first else y_c)
    return tuple(outs)
