"""Trigonometric and hyperbolic functions beyond sin, cos and tanh (``elementwise.py``): tan,
the inverse functions and the hyperbolic ones.

Cost (COUNTING.md): 1 FLOP per element each, as exp, log and the other transcendental ops.
"""

from __future__ import annotations

__all__ = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]

from .elementwise import _unary, add, div, mul, neg, sqrt, sub


# ptflops' tables have none of these functions: no ptflops rule (ptflops=None)

def _one_minus_square(x):
    return sub(1.0, mul(x, x))


Tan, tan = _unary("tan", lambda xp, x: xp.tan(x), lambda g, out, x: mul(g, add(1.0, mul(out, out))),  # 1 + tan²
                  "Elementwise tangent.\n\n    >>> tan(rt.tensor([0.0])).tolist()\n    [0.0]\n    ", float_only=True,
                  onnx="Tan", ptflops=None)
Asin, asin = _unary("asin", lambda xp, x: xp.arcsin(x), lambda g, out, x: div(g, sqrt(_one_minus_square(x))),
                    "Elementwise arcsine (NaN outside [-1, 1]).", float_only=True, onnx="Asin", ptflops=None)
Acos, acos = _unary("acos", lambda xp, x: xp.arccos(x), lambda g, out, x: neg(div(g, sqrt(_one_minus_square(x)))),
                    "Elementwise arccosine (NaN outside [-1, 1]).", float_only=True, onnx="Acos", ptflops=None)
Atan, atan = _unary("atan", lambda xp, x: xp.arctan(x), lambda g, out, x: div(g, add(1.0, mul(x, x))),
                    "Elementwise arctangent.", float_only=True, onnx="Atan", ptflops=None)
Sinh, sinh = _unary("sinh", lambda xp, x: xp.sinh(x), lambda g, out, x: mul(g, cosh(x)),
                    "Elementwise hyperbolic sine.", float_only=True, onnx="Sinh", ptflops=None)
Cosh, cosh = _unary("cosh", lambda xp, x: xp.cosh(x), lambda g, out, x: mul(g, sinh(x)),
                    "Elementwise hyperbolic cosine.", float_only=True, onnx="Cosh", ptflops=None)
Asinh, asinh = _unary("asinh", lambda xp, x: xp.arcsinh(x), lambda g, out, x: div(g, sqrt(add(mul(x, x), 1.0))),
                      "Elementwise inverse hyperbolic sine.", float_only=True, onnx="Asinh", ptflops=None)
Acosh, acosh = _unary("acosh", lambda xp, x: xp.arccosh(x), lambda g, out, x: div(g, sqrt(sub(mul(x, x), 1.0))),
                      "Elementwise inverse hyperbolic cosine (NaN below 1).", float_only=True, onnx="Acosh",
                      ptflops=None)
Atanh, atanh = _unary("atanh", lambda xp, x: xp.arctanh(x), lambda g, out, x: div(g, _one_minus_square(x)),
                      "Elementwise inverse hyperbolic tangent (NaN outside (-1, 1)).", float_only=True,
                      onnx="Atanh", ptflops=None)
