"""The optimizers of ``ai.onnx.preview.training``: Adagrad, Adam and Momentum (plain and
Nesterov), one update of every (X, G, state...) group, as elementwise ops. The step count T
must be known when the graph is built (it picks the update's form)."""

from __future__ import annotations

from ...ops import elementwise as ew
from ._base import converter

_DOMAIN = "ai.onnx.preview.training"


def _groups(data: tuple, per: int) -> list:
    """(X, G, state...) of every optimized tensor: the inputs list all X, then all G, ..."""
    n = len(data) // per
    return [tuple(data[k * n + i] for k in range(per)) for i in range(n)]


def _regularized(x, g, norm: float):
    return g if norm == 0 else ew.add(ew.mul(x, norm), g)


@converter(f"{_DOMAIN}.Adagrad")
def adagrad(ctx, rate, step, *data):
    t = ctx.scalar(step, "input 'T'")
    decay, eps, norm = ctx.attr("decay_factor", 0.0), ctx.attr("epsilon", 0.0), ctx.attr("norm_coefficient", 0.0)
    r = ew.div(rate, 1 + t * decay)
    xs, hs = [], []
    for x, g, h in _groups(data, 3):
        g = _regularized(x, g, norm)
        h = ew.add(h, ew.mul(g, g))
        xs.append(ew.sub(x, ew.div(ew.mul(r, g), ew.add(ew.sqrt(h), eps))))
        hs.append(h)
    return tuple(xs + hs)


@converter(f"{_DOMAIN}.Adam")
def adam(ctx, rate, step, *data):
    t = ctx.scalar(step, "input 'T'")
    alpha, beta = ctx.attr("alpha", 0.9), ctx.attr("beta", 0.999)
    eps, norm, post = ctx.attr("epsilon", 0.0), ctx.attr("norm_coefficient", 0.0), ctx.attr("norm_coefficient_post", 0.0)
    r = ew.mul(rate, (1 - beta ** t) ** 0.5 / (1 - alpha ** t)) if t > 0 else rate
    xs, vs, hs = [], [], []
    for x, g, v, h in _groups(data, 4):
        g = _regularized(x, g, norm)
        v = ew.add(ew.mul(v, alpha), ew.mul(g, 1 - alpha))
        h = ew.add(ew.mul(h, beta), ew.mul(ew.mul(g, g), 1 - beta))
        x = ew.sub(x, ew.mul(r, ew.div(v, ew.add(ew.sqrt(h), eps))))
        xs.append(ew.mul(x, 1 - post))
        vs.append(v)
        hs.append(h)
    return tuple(xs + vs + hs)


@converter(f"{_DOMAIN}.Momentum")
def momentum(ctx, rate, step, *data):
    t = ctx.scalar(step, "input 'T'")
    alpha, beta, norm = ctx.attr("alpha"), ctx.attr("beta"), ctx.attr("norm_coefficient")
    nesterov = ctx.attr("mode", "standard") == "nesterov"
    xs, vs = [], []
    for x, g, v in _groups(data, 3):
        g = _regularized(x, g, norm)
        v = ew.add(ew.mul(v, alpha), ew.mul(g, beta if t > 0 else 1.0))
        step_dir = ew.add(g, ew.mul(v, alpha)) if nesterov else v
        xs.append(ew.sub(x, ew.mul(rate, step_dir)))
        vs.append(v)
    return tuple(xs + vs)
