"""Trigonometric and hyperbolic functions beyond sin, cos and tanh (``elementwise.py``): tan,
the inverse functions and the hyperbolic ones.

Cost (COUNTING.md): 1 FLOP per element each, as exp, log and the other transcendental ops.
"""

from __future__ import annotations

__all__ = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]

from ..dispatch import apply
from ..registry import Op
from .elementwise import _unary, add, div, mul, neg, sqrt, sub


def _one_minus_square(x):
    return sub(1.0, mul(x, x))


@_unary("tan", float_only=True)
class Tan(Op):
    def forward(xp, x):
        return xp.tan(x)

    def vjp(g, out, x):
        return mul(g, add(1.0, mul(out, out)))  # 1 + tan²


@_unary("asin", float_only=True)
class Asin(Op):
    def forward(xp, x):
        return xp.arcsin(x)

    def vjp(g, out, x):
        return div(g, sqrt(_one_minus_square(x)))


@_unary("acos", float_only=True)
class Acos(Op):
    def forward(xp, x):
        return xp.arccos(x)

    def vjp(g, out, x):
        return neg(div(g, sqrt(_one_minus_square(x))))


@_unary("atan", float_only=True)
class Atan(Op):
    def forward(xp, x):
        return xp.arctan(x)

    def vjp(g, out, x):
        return div(g, add(1.0, mul(x, x)))


@_unary("sinh", float_only=True)
class Sinh(Op):
    def forward(xp, x):
        return xp.sinh(x)

    def vjp(g, out, x):
        return mul(g, cosh(x))


@_unary("cosh", float_only=True)
class Cosh(Op):
    def forward(xp, x):
        return xp.cosh(x)

    def vjp(g, out, x):
        return mul(g, sinh(x))


@_unary("asinh", float_only=True)
class Asinh(Op):
    def forward(xp, x):
        return xp.arcsinh(x)

    def vjp(g, out, x):
        return div(g, sqrt(add(mul(x, x), 1.0)))


@_unary("acosh", float_only=True)
class Acosh(Op):
    def forward(xp, x):
        return xp.arccosh(x)

    def vjp(g, out, x):
        return div(g, sqrt(sub(mul(x, x), 1.0)))


@_unary("atanh", float_only=True)
class Atanh(Op):
    def forward(xp, x):
        return xp.arctanh(x)

    def vjp(g, out, x):
        return div(g, _one_minus_square(x))


def _function(op, doc: str):
    def fn(x):
        return apply(op, x)

    fn.__name__ = op.name
    fn.__doc__ = doc
    return fn


tan = _function(Tan, "Elementwise tangent.\n\n    >>> tan(rt.tensor([0.0])).tolist()\n    [0.0]\n    ")
asin = _function(Asin, "Elementwise arcsine (NaN outside [-1, 1]).")
acos = _function(Acos, "Elementwise arccosine (NaN outside [-1, 1]).")
atan = _function(Atan, "Elementwise arctangent.")
sinh = _function(Sinh, "Elementwise hyperbolic sine.")
cosh = _function(Cosh, "Elementwise hyperbolic cosine.")
asinh = _function(Asinh, "Elementwise inverse hyperbolic sine.")
acosh = _function(Acosh, "Elementwise inverse hyperbolic cosine (NaN below 1).")
atanh = _function(Atanh, "Elementwise inverse hyperbolic tangent (NaN outside (-1, 1)).")
