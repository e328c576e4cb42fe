"""What MODEL on the command line names, and how it becomes a Module or a Graph.

* ``path/to/file.py:factory`` runs that Python file and calls ``factory(**factory_args)``;
* ``*.onnx`` is imported from ONNX (read only, nothing in it is executed);
* any other path (it contains ``/`` or a ``.``) is a native model file (safetensors; read only);
* anything else is a zoo name (``resnet50``). A bare name that is both a zoo model and a file in
  the current directory means the zoo model; ``./name`` means the file.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field

from ..runtime import errors
from ..runtime.dispatch import default_device
from ..runtime.graph import Graph
from ..runtime.nn.modules.module import Module
from .inputs import InputSpec, format_shape

FACTORY, ONNX, NATIVE, ZOO = "factory", "onnx", "native", "zoo"
ONNX_INSTALL = "pip install 'flopcount[onnx]'"


@dataclass
class Target:
    """A loaded model and what the command line needs to know about it.

    ``expected`` lists the inputs the model takes (``None``: unknown, so ``--input-shape`` is
    required); ``fixed`` means those shapes cannot change (a graph file is specialized to
    them); ``notes`` are remarks for stderr.
    """

    model: object
    label: str
    kind: str
    expected: list | None = None
    fixed: bool = False
    notes: list = field(default_factory=list)


def kind_of(spec: str) -> str:
    """Which of factory, onnx, native file or zoo name ``spec`` is (see the module docstring)."""
    from .. import models

    if ".py:" in spec or spec.endswith(".py"):
        return FACTORY
    if spec.lower().endswith(".onnx"):
        return ONNX
    if spec in models.names():
        return ZOO
    if "/" in spec or os.sep in spec or "." in spec or os.path.exists(spec):
        return NATIVE
    return ZOO


def _require_file(path: str) -> None:
    if not os.path.exists(path):
        raise errors.ModelFileError(f"{path}: no such file")
    if os.path.isdir(path):
        raise errors.ModelFileError(f"{path}: is a directory, not a model file")


def graph_inputs(graph) -> list:
    """The inputs of a Graph as InputSpecs (its shapes are fixed)."""
    return [InputSpec(v.name, tuple(v.shape), v.dtype.name) for v in graph.inputs]


def load_zoo(name: str, device) -> Target:
    from .. import models

    entry = models.info(name)   # an unknown name raises, suggesting the closest ones
    with default_device(device):
        net = models.get(name)
    expected = [InputSpec(n, (1,) + tuple(shape), dtype, high) for n, shape, dtype, high in entry.inputs]
    target = Target(net, name, ZOO, expected)
    if os.path.isfile(name):
        target.notes.append(f"'{name}' is the zoo model; write ./{name} for the file of that name")
    return target


def load_native(path: str, device) -> Target:
    from ..runtime.io import load

    _require_file(path)
    graph = load(path)
    if str(device) != "cpu":
        graph.to(device)
    return Target(graph, os.path.basename(path), NATIVE, graph_inputs(graph), fixed=True)


def load_onnx(path: str, device, given: list, batch: int | None) -> Target:
    """Import an ONNX file, its symbolic dimensions bound from ``given`` (``parse_shape``
    results) and ``batch``."""
    _require_file(path)
    onnx_io = onnx_module(path)
    try:
        graph = onnx_io.load(path, input_shapes=onnx_binding(path, given, batch))
    except errors.ShapeError as exc:
        hint = _onnx_hint(path, example=not given and batch is None)
        raise errors.ShapeError(f"{os.path.basename(path)}: {exc}; {hint}") from exc
    if str(device) != "cpu":
        graph.to(device)
    return Target(graph, os.path.basename(path), ONNX, graph_inputs(graph), fixed=True)


def onnx_input_dims(path: str) -> list:
    """[(name, dims)] of an ONNX file's inputs (initializers excluded); a dim is an int, the
    name of a symbolic dim, or None when unknown."""
    from ..runtime.onnx.importer import read_model

    model = read_model(path)
    weights = {t.name for t in model.graph.initializer}
    out = []
    for value in model.graph.input:
        if value.name in weights:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in value.type.tensor_type.shape.dim]
        out.append((value.name, dims))
    return out


def _onnx_hint(path: str, example: bool) -> str:
    # what the file takes, and (when nothing was given) a line to paste: unknown dims shown as 1
    inputs = onnx_input_dims(path)
    declared = ", ".join(f"{name} [{', '.join('?' if d is None else str(d) for d in dims)}]"
                         for name, dims in inputs)
    paste = " ".join(f"-i {name}={format_shape(d if isinstance(d, int) else 1 for d in dims)}"
                     for name, dims in inputs if dims)
    if example and paste:
        return f"the file's inputs are {declared}; give their shapes, e.g. {paste}"
    return f"the file's inputs are {declared}"


def onnx_binding(path: str, given: list, batch: int | None):
    """``input_shapes`` for the ONNX importer: a dict by name, or a list in input order. With
    ``batch``, every input whose other dims are known gets that first dimension."""
    named = {name: dims for name, dims in given if name is not None}
    positional = [dims for name, dims in given if name is None]
    if batch is None:
        if not given:
            return None
        if named and positional:
            raise errors.ShapeError("for an ONNX model give every --input-shape by name (name=1x128) or none by name")
        return named or positional
    shapes = {}
    for i, (name, dims) in enumerate(onnx_input_dims(path)):
        shape = named.pop(name, None) or (positional[i] if i < len(positional) else None)
        if shape is None and dims and all(isinstance(d, int) for d in dims[1:]):
            shape = tuple(dims)
        if shape:
            shapes[name] = (batch,) + tuple(shape[1:])
    shapes.update(named)   # names the file does not have: the importer says which inputs it has
    return shapes


def onnx_module(path: str):
    """``flopcount.runtime.onnx``, or a one-line error naming what is missing."""
    try:
        from ..runtime import onnx as onnx_io
    except ImportError as exc:
        missing = getattr(exc, "name", None) or ""
        if missing == "onnx" or missing.startswith("onnx."):
            raise errors.ModelFileError(f"{path}: reading ONNX files needs the onnx package: {ONNX_INSTALL}") from None
        raise errors.ModelFileError(f"{path}: ONNX import is not available in this version of flopcount") from None
    return onnx_io


def load_factory(spec: str, device, factory_args: dict) -> Target:
    """Run ``file.py`` (as ``python file.py`` would, its directory importable) and call the
    factory. Whatever goes wrong in the user's code comes back as one FlopcountError."""
    path, sep, attr = spec.rpartition(":") if ".py:" in spec else (spec, "", "")
    if not attr:
        raise errors.FlopcountError(f"{spec}: name the function that builds the model, e.g. {spec}:make_model")
    _require_file(path)
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)
    stem = os.path.splitext(os.path.basename(path))[0]
    loader = importlib.util.spec_from_file_location(f"flopcount_user_{stem}", path)
    module = importlib.util.module_from_spec(loader)
    try:
        loader.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        raise errors.FlopcountError(f"{path}: running the file failed: {_describe(exc)}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == module.__name__)
        hint = f"; it defines {', '.join(found)}" if found else ""
        raise errors.FlopcountError(f"{path} has no function {attr!r}{hint}")
    try:
        with default_device(device):
            model = factory(**factory_args)
    except (Exception, SystemExit) as exc:
        raise errors.FlopcountError(f"{spec} raised {_describe(exc)}") from exc
    if not isinstance(model, (Module, Graph)):
        raise errors.FlopcountError(f"{spec} returned {type(model).__name__}, not a flopcount.runtime.nn.Module "
                                    f"(build the model with flopcount.runtime.nn)")
    if isinstance(model, Graph):
        return Target(model, f"{os.path.basename(path)}:{attr}", FACTORY, graph_inputs(model), fixed=True)
    return Target(model, f"{os.path.basename(path)}:{attr}", FACTORY)


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load(spec: str, device, *, zoo_device=None, given: list = (), batch: int | None = None,
         factory_args: dict | None = None) -> Target:
    """The Target named by ``spec``. Zoo models are built on ``zoo_device`` (the meta device
    when only counting), everything else on ``device``; an ONNX file's symbolic dimensions are
    bound from ``given`` shapes and ``batch``."""
    kind = kind_of(spec)
    if kind == FACTORY:
        return load_factory(spec, device, factory_args or {})
    if factory_args:
        raise errors.FlopcountError(f"--factory-arg applies to file.py:factory models, not to {spec}")
    if kind == ONNX:
        return load_onnx(spec, device, list(given), batch)
    if kind == NATIVE:
        return load_native(spec, device)
    return load_zoo(spec, zoo_device or device)


def check_fixed(target: Target, specs: list) -> None:
    """A graph file runs only on the shapes it was made for: say which when they differ."""
    if not target.fixed:
        return
    want = [(s.shape, s.dtype) for s in target.expected]
    got = [(tuple(s.shape), s.dtype) for s in specs]
    if want != got:
        raise errors.ShapeError(
            f"{target.label} takes " + ", ".join(s.describe() for s in target.expected)
            + " (a model file is fixed to the shapes it was saved with); got "
            + ", ".join(s.describe() for s in specs))


__all__ = ["Target", "kind_of", "load", "load_zoo", "load_native", "load_onnx", "load_factory", "check_fixed",
           "graph_inputs", "onnx_input_dims", "onnx_binding"]
