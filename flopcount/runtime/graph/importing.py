"""What every importer (ONNX, TFLite, torch, JAX) shares: the tracer that records a model
file's nodes as a Graph, and the steps of converting one node of the file.

An importer's walk goes over the file's nodes in order, and for each one::

    args = node_inputs(names, values, missing)           # by name; trailing absent ones dropped
    with tracer.converting(where, scope, module_type=..., source=..., mac_dtype=...):
        result = converter(ctx, *args)

``converting`` runs the converter in the node's module scope (as ``named_scope`` does), stamps
every graph node recorded meanwhile with the file node's provenance in ``node.meta``, and makes
an error raised on the way name the file node. A conversion nested in another (an ONNX If's
branch, a JAX call) stamps its own keys; those it leaves empty come from the enclosing one.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Callable, Iterator, Mapping

from ..dispatch import named_scope
from ..errors import FlopcountError, ModelFileError
from ..factories import empty
from .ir import Graph
from .trace import Tracer

# what a converter's arithmetic on a file's values raises where no valid file has them
# (a zero step, a negative size)
_INVALID_VALUES = (ArithmeticError, ValueError, TypeError, IndexError, KeyError)


class ImportTracer(Tracer):
    """The graph tracer for an importer: graph inputs named as the file names them, the file's
    parameters and buffers (``{name: (tensor, kind)}``) registered before the trace starts,
    and every recorded node stamped with the provenance of the file node being converted.
    ``module_types`` ``{scope: class name}`` gives a node's module type where its file node
    does not (a JAX module's path).

    >>> import flopcount.runtime as rt
    >>> tracer = ImportTracer(lambda x: x.relu(), ["image"], {})
    >>> with tracer.converting("node 'r'", "block", source="r"):
    ...     pass
    >>> [v.name for v in tracer.run((rt.randn(2),), {}).inputs]
    ['image']
    """

    def __init__(self, fn, input_names: list, params: dict, module_types: dict | None = None):
        super().__init__(fn)
        self.input_names = list(input_names)
        self.module_types = module_types or {}
        self._provenance: list[dict] = []   # one entry per file node being converted, outermost first
        for name, (tensor, kind) in params.items():
            self.known[id(tensor)] = self.graph.add_parameter(name, tensor, kind)

    def _arg_names(self, args: tuple, kwargs: dict) -> list:
        return list(self.input_names)

    def record(self, op, inputs: tuple, attrs: dict):
        count = len(self.graph.nodes)
        out = super().record(op, inputs, attrs)
        for node in self.graph.nodes[count:]:   # none when the op folded to a constant
            for provenance in self._provenance:
                node.meta.update(provenance)
            if not node.module_type and self.module_types:
                node.module_type = _enclosing(node.scope, self.module_types)
        return out

    @contextmanager
    def converting(self, where: str, scope: str = "", *, keep: tuple = (), prefixed: str | None = None,
                   invalid: str | None = None, **provenance) -> Iterator[None]:
        """Convert one file node (``where`` names it in errors) in module ``scope``; the nodes
        recorded meanwhile get the non-empty ``provenance`` keys (``module_type``, ``source``,
        ``mac_dtype``) in their ``meta``.

        A FlopcountError gets ``where`` in front, unless it is one of ``keep`` or its message
        already starts with ``prefixed``. With ``invalid`` (what the file gives a node:
        ``"attributes"``), Python's errors from a converter's arithmetic become a
        ModelFileError: the file's values are not ones a valid file has."""
        self._provenance.append({key: value for key, value in provenance.items() if value})
        try:
            with named_scope(scope) if scope else nullcontext():
                yield
        except keep:
            raise
        except FlopcountError as exc:
            if prefixed is not None and str(exc).startswith(prefixed):
                raise
            raise type(exc)(f"{where}: {exc}") from exc
        except _INVALID_VALUES as exc:
            if invalid is None:
                raise
            raise ModelFileError(f"{where}: invalid {invalid} or operands ({type(exc).__name__}: "
                                 f"{first_line(exc)})") from exc
        finally:
            self._provenance.pop()


def _enclosing(scope: str, module_types: dict) -> str:
    """The module type of ``scope`` or of the nearest scope enclosing it."""
    while scope:
        if scope in module_types:
            return module_types[scope]
        scope = scope.rpartition(".")[0]
    return ""


def node_inputs(names, values: Mapping, missing: Callable[[object], Exception]) -> list:
    """The values of a node's inputs by name (None: an optional input left out), without the
    trailing absent ones; ``missing(name)`` is the error for a name nothing defined.

    >>> node_inputs(["x", None, "w", None], {"x": 1, "w": 2}, KeyError)
    [1, None, 2]
    """
    args = []
    for name in names:
        if name is None:
            args.append(None)
        elif name in values:
            args.append(values[name])
        else:
            raise missing(name)
    while args and args[-1] is None:
        args.pop()
    return args


def walk_result(names, values: Mapping, missing: Callable[[object], Exception]):
    """What an importer's walk returns: the values of the graph's outputs by name (one value,
    or a tuple of them); ``missing(name)`` is the error for an output nothing computed."""
    outs = node_inputs(names, values, missing)
    return outs[0] if len(outs) == 1 else tuple(outs)


def trace_import(walk, input_names: list, params: dict, specs, module_types: dict | None = None) -> Graph:
    """The Graph of ``walk`` (the importer's function over the file's nodes, whose ``tracer``
    is set while it runs) traced on meta inputs of ``specs`` ``[(shape, dtype)]``."""
    tracer = ImportTracer(walk, input_names, params, module_types)
    walk.tracer = tracer
    try:
        return tracer.run(tuple(empty(*shape, dtype=dtype, device="meta") for shape, dtype in specs), {})
    finally:
        walk.tracer = None  # no cycle keeps the walk's tensors alive until a collection


def first_line(exc: Exception) -> str:
    """The first line of an error's message, or its type's name when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
