"""The converter table and what a converter gets: ``EqnContext`` (the equation's parameters,
its output shapes, a way to run a sub-jaxpr in place, and notes for the report).

A converter is ``fn(ctx, *inputs) -> Tensor | list``: ``inputs`` are runtime tensors (literals
as constants) and the converter calls runtime ops on them, which the graph tracer records.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ... import dtypes as _dt
from ...errors import UnsupportedOpError
from ...tensor import Tensor
from ...registry import registrar

CONVERTERS: dict[str, Callable] = {}


# ``@converter("dot_general", ...)``: the converter of each JAX primitive named
converter = registrar(CONVERTERS, "JAX primitive", "a converter")


class EqnContext:
    """One jaxpr equation as its converter sees it."""

    __slots__ = ("eqn", "params", "walk", "scope")

    def __init__(self, eqn, walk, scope: str):
        self.eqn = eqn
        self.params = eqn.params
        self.walk = walk      # the importer: runs sub-jaxprs, keeps notes
        self.scope = scope

    @property
    def primitive(self) -> str:
        return self.eqn.primitive.name

    @property
    def where(self) -> str:
        return f"JAX {self.primitive}" + (f" in {self.scope}" if self.scope else "")

    @property
    def out_avals(self) -> list:
        return [v.aval for v in self.eqn.outvars]

    @property
    def out_dtype(self):
        return dtype_of(self.eqn.outvars[0].aval.dtype)

    def unsupported(self, detail: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"{self.where}: {detail}")

    def run(self, jaxpr, inputs: list, consts=None) -> list:
        """The outputs of ``jaxpr`` (open or closed) on ``inputs``, converted in place."""
        return self.walk.run_jaxpr(jaxpr, inputs, self.scope, consts)

    def note(self, text: str) -> None:
        self.walk.note(text)

    def const(self, t, what: str):
        """The value of ``t`` as a numpy array; an error when the model computes it from its inputs."""
        if isinstance(t, Tensor) and t.data is not None:
            return np.asarray(t.data)
        raise self.unsupported(f"{what} depends on the values the model computes; flopcount needs it known "
                               f"from shapes and constants")


def dtype_of(np_dtype):
    """The runtime dtype of a JAX dtype."""
    return _dt.get_dtype(np.dtype(np_dtype))


def is_key(dtype) -> bool:
    """Whether ``dtype`` is a PRNG key type (``key<fry>``), which has no numpy dtype."""
    import jax

    return jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def spec_of(aval) -> tuple:
    """(shape, runtime dtype) of a JAX value: a PRNG key is its key data (``uint32[..., 2]``
    for threefry), as ``jax.random.key_data`` lays it out."""
    if is_key(aval.dtype):
        import jax

        data = jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(aval.shape, aval.dtype))
        return tuple(int(n) for n in data.shape), dtype_of(data.dtype)
    return tuple(int(n) for n in aval.shape), dtype_of(aval.dtype)


def constant(array, dtype=None) -> Tensor:
    """A CPU tensor holding ``array`` (the tracer keeps it as a graph constant)."""
    from ...tensor import tensor

    arr = np.asarray(array)
    return tensor(arr, dtype=dtype if dtype is not None else dtype_of(arr.dtype), device="cpu")
