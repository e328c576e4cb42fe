"""JAX primitives -> runtime ops, one family a file; importing this package fills ``CONVERTERS``."""

from . import control, math, nn, tensor  # noqa: F401  (register their converters)
from ._base import CONVERTERS, EqnContext, constant, converter, dtype_of, spec_of

__all__ = ["CONVERTERS", "EqnContext", "constant", "converter", "dtype_of", "spec_of"]
