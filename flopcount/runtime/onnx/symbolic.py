"""Symbolic input dims (``batch``, ``sequence``) bound to numbers from the user's input shapes.

A graph input's dims are ints, names (``dim_param``) or unknown (None). ``bind`` takes
``input_shapes`` as a dict ``{input name: shape}``, a list of shapes in input order, or one
shape for a one-input model, checks them against the declared dims, and gives every input a
concrete shape. A name bound once (``batch`` by ``input_ids``) also fixes the same name in other
inputs, so ``attention_mask: [batch, sequence]`` needs no shape of its own.
"""

from __future__ import annotations

from numbers import Integral

from ..errors import ModelFileError, ShapeError


class InputShapeError(ShapeError):
    """Input shapes that do not bind the file's declared inputs (a caller can fix it by giving
    other shapes, unlike a ShapeError inside the graph)."""


class InputValueError(ShapeError):
    """A graph input whose values decide shapes (a Reshape target, Slice starts, TopK's k) and
    that were not bound; ``names`` are the inputs whose values are needed."""

    def __init__(self, names: list, message: str):
        super().__init__(message)
        self.names = list(names)


def _dims(name: str, shape) -> tuple:
    """``shape`` as a tuple of ints >= 0 (ONNX tensors may be empty), or an InputShapeError
    naming the input."""
    try:
        dims = tuple(shape)
    except TypeError:
        raise InputShapeError(f"input_shapes gives {shape!r} for input {name!r}, not a shape") from None
    bad = [d for d in dims if not isinstance(d, Integral) or isinstance(d, bool) or d < 0]
    if bad:
        raise InputShapeError(f"input_shapes gives {dims} for input {name!r}: every dim must be an integer >= 0, "
                              f"got {bad[0]!r}")
    return tuple(int(d) for d in dims)


def _as_binding(input_shapes, names: list) -> dict:
    """``input_shapes`` as {input name: shape tuple}."""
    if input_shapes is None:
        return {}
    if isinstance(input_shapes, dict):
        unknown = [k for k in input_shapes if k not in names]
        if unknown:
            raise InputShapeError(f"input_shapes names {unknown}, which are not inputs of the model "
                                  f"(its inputs are {names})")
        return {k: _dims(k, v) for k, v in input_shapes.items()}
    shapes = list(input_shapes)
    if shapes and not any(isinstance(d, (tuple, list)) for d in shapes):  # one shape for a one-input model
        shapes = [tuple(shapes)]
    if len(shapes) > len(names):
        raise InputShapeError(f"input_shapes gives {len(shapes)} shapes but the model has {len(names)} "
                              f"input(s) {names}")
    return {name: _dims(name, s) for name, s in zip(names, shapes)}


def _describe(dims) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def bind(inputs: list, input_shapes=None) -> list:
    """Concrete shapes for ``inputs`` [(name, dims or None when the rank is unknown)].

    >>> bind([("ids", ["batch", 8])], {"ids": (2, 8)})
    [(2, 8)]
    """
    names = [name for name, _ in inputs]
    for name, dims in inputs:
        if any(isinstance(d, int) and d < 0 for d in dims or ()):
            raise ModelFileError(f"input {name!r} declares a negative dim: {_describe(dims)}")
    given = _as_binding(input_shapes, names)
    symbols: dict = {}  # symbolic name -> (value, the input that bound it)
    for name, dims in inputs:
        if name not in given:
            continue
        shape = given[name]
        if dims is not None and len(dims) != len(shape):
            raise InputShapeError(f"input {name!r} has {len(dims)} dims {_describe(dims)}, but input_shapes "
                             f"gives {len(shape)}: {shape}")
        for d, n in zip(dims or [None] * len(shape), shape):
            if isinstance(d, int) and d != n:
                raise InputShapeError(f"input {name!r} has dims {_describe(dims)}; input_shapes gives {shape}")
            if isinstance(d, str):
                seen = symbols.setdefault(d, (n, name))
                if seen[0] != n:
                    raise InputShapeError(f"symbolic dim {d!r} is {seen[0]} for input {seen[1]!r} but {n} for "
                                     f"input {name!r} in input_shapes")
    shapes, missing = [], []
    for name, dims in inputs:
        if name in given:
            shapes.append(given[name])
            continue
        if dims is not None and all(isinstance(d, int) or (isinstance(d, str) and d in symbols) for d in dims):
            shapes.append(tuple(d if isinstance(d, int) else symbols[d][0] for d in dims))
            continue
        missing.append((name, dims))
        shapes.append(None)
    if missing:
        parts = []
        for name, dims in missing:
            if dims is None:
                parts.append(f"input {name!r} has no declared shape")
            else:
                free = [d if isinstance(d, str) else "?" for d in dims if not isinstance(d, int)]
                parts.append(f"input {name!r} has symbolic dims {free}")
        example = ", ".join(f"{name!r}: (...)" for name, _ in missing)
        raise InputShapeError(f"{'; '.join(parts)}; pass input_shapes, e.g. input_shapes={{{example}}}")
    return shapes


def input_values(inputs: list, shapes: list, dtypes: list, values) -> dict:
    """``values`` ({input name: array-like}) as numpy arrays of each input's bound shape and
    dtype; an InputShapeError for a name the model does not take or a value that does not fit.

    >>> import numpy as np; from flopcount.runtime import dtypes
    >>> input_values([("k", [1], 7)], [(1,)], [dtypes.int64], {"k": [3]})
    {'k': array([3])}
    """
    import numpy as np

    if not values:
        return {}
    names = [entry[0] for entry in inputs]
    out = {}
    for name, value in values.items():
        if name not in names:
            raise InputShapeError(f"input_values names {name!r}, which is not an input of the model "
                                  f"(its inputs are {names})")
        i = names.index(name)
        array = np.asarray(value)
        if tuple(array.shape) != tuple(shapes[i]):
            if array.size != int(np.prod(shapes[i], dtype=np.int64)):  # flat values of the right count fit
                raise InputShapeError(f"input_values gives input {name!r} {array.size} value(s) of shape "
                                      f"{tuple(array.shape)}; the input's shape is {tuple(shapes[i])}")
            array = array.reshape(shapes[i])
        out[name] = np.array(array, dtype=dtypes[i].np, order="C")  # (ascontiguousarray makes 0-d 1-d)
    return out
