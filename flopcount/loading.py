"""What a model spec names and how it becomes a Module or a Graph: one set of rules for
``flopcount.profile`` and the command line.

* a Module or a Graph is itself;
* ``path/to/file.py:factory`` RUNS that Python file (as ``python file.py`` would) and calls
  ``factory(**factory_args)``: use it only for code you trust;
* ``*.onnx`` is imported from ONNX: the file is only read, nothing in it is executed;
* an existing path is that path, even when the zoo has a model of that name (a folder
  ``llama/`` beside you is the folder, with a note naming ``zoo:llama`` for the zoo's model);
* a zoo name (``resnet50``) is the zoo model; ``zoo:resnet50`` always is;
* any other path is a model file, its kind read from its bytes, whatever its name: one of
  :mod:`flopcount.file_formats` (a GGUF file, a TensorFlow Lite flatbuffer, a Keras ``.keras``
  file, Keras never imported), a native file (safetensors), a PyTorch archive; files are only
  read: nothing is unpickled or run.

Model files are graphs specialized to their input shapes: an ONNX file's symbolic dims are
bound from the shapes given (``input_shapes``, ``batch``), a native file takes the shapes it
was saved with. Every failure is one :class:`~flopcount.FlopcountError` line naming the file.

    target = load("model.onnx", "cpu", given=[("input_ids", (1, 128))])
    target.model, target.expected      # Graph, [InputSpec('input_ids', (1, 128), 'int64')]
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import replace

from .options import Option, option_error
from . import file_formats
from .target import (FACTORY, HF, JAX, NATIVE, OBJECT, ONNX, PT2, TORCH, ZOO, Target, built_inputs,  # noqa: F401
                     built_target, graph_file_target, graph_inputs, naming_errors, placed)
from .runtime import errors
from .runtime.dtypes import get_dtype
from .runtime.dispatch import default_device
from .runtime.graph import Graph
from .runtime.nn.modules.module import Module
from .runtime import torch as rt_torch

ONNX_INSTALL = "pip install onnx"
ZOO_PREFIX = "zoo:"   # zoo:llama is the zoo's model even where a path named llama exists


def kind_of(spec: str) -> str:
    """Which of factory, onnx, native file or zoo name ``spec`` is (see the module docstring)."""
    from . import models

    if spec.startswith(ZOO_PREFIX):
        return ZOO
    if ".py:" in spec or spec.endswith(".py"):
        return FACTORY
    if spec.lower().endswith(".onnx"):
        return ONNX
    if spec.lower().endswith(".pt2"):
        return PT2
    if spec in models.names() and not os.path.exists(spec):
        return ZOO
    if os.path.isdir(spec):
        return HF
    if "/" in spec or os.sep in spec or "." in spec or os.path.exists(spec):
        return NATIVE
    return ZOO


def load(spec, device="cpu", *, zoo_device=None, given=(), batch: int | None = None,
         factory_args: dict | None = None, values: dict | None = None, framework: str | None = None) -> Target:
    """The Target named by ``spec`` (a Module, a Graph, a JAX model, a path or a zoo name). Zoo
    models are built on ``zoo_device`` (the meta device when only counting), models from files on
    ``device``; an ONNX file's symbolic dims are bound from ``given`` [(name or None, dims)]
    and ``batch``, and the inputs that carry shapes (a Reshape target, TopK's k) from
    ``values`` {name: array}. ``framework="jax"`` says the model (or what a ``file.py:factory``
    returns) is a JAX one (see ``jax_loading.py``; detected from its type otherwise)."""
    if framework is not None and framework not in jax_loading_names():
        raise errors.FlopcountError(f"framework must be one of {', '.join(jax_loading_names())}, got {framework!r}")
    if rt_torch.is_module(spec):
        if factory_args:
            raise errors.FlopcountError("factory_args apply to 'file.py:factory' models, not to a model object")
        return torch_loading().load_module(spec)
    if not isinstance(spec, (Module, Graph, str, os.PathLike)) and jax_loading().is_model(spec, framework):
        if factory_args:
            raise errors.FlopcountError("factory_args apply to 'file.py:factory' models, not to a model object")
        return jax_loading().load_model(spec)
    if isinstance(spec, (Module, Graph)):
        if factory_args:
            raise errors.FlopcountError("factory_args apply to 'file.py:factory' models, not to a model object")
        if isinstance(spec, Graph):
            return Target(spec, "", OBJECT, graph_inputs(spec), fixed=True)
        return Target(spec, "", OBJECT)
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise TypeError(f"model must be a Module (flopcount or torch), a Graph, a zoo name or a file path, "
                        f"got {type(spec).__name__}")
    kind = kind_of(spec)
    if kind == FACTORY:
        return load_factory(spec, device, factory_args or {}, framework)
    if factory_args:
        raise option_error(errors.FlopcountError, Option("factory_args"), f" applies to file.py:factory models, "
                           f"not to {spec}")
    if framework is not None:
        raise option_error(errors.FlopcountError, Option("framework", framework), f" applies to file.py:factory "
                           f"models and model objects, not to {spec}")
    if kind == ONNX:
        return load_onnx(spec, device, list(given), batch, values)
    if kind == PT2:
        _require_file(spec)
        return torch_loading().load_pt2(spec, device, list(given), batch)
    if kind == ZOO:
        return load_zoo(zoo_name(spec), zoo_device or device)
    target = load_native(spec, device, zoo_device) if kind == NATIVE else load_hf_folder(spec, zoo_device or device)
    _note_zoo_namesake(target, spec)
    return target


def zoo_name(spec: str) -> str:
    """The zoo name a spec of kind ZOO asks for: ``zoo:llama`` -> ``llama``."""
    return spec[len(ZOO_PREFIX):] if spec.startswith(ZOO_PREFIX) else spec


def _note_zoo_namesake(target: Target, spec: str) -> None:
    # the path was taken; a user who meant the zoo's model of the same name learns how to ask
    from . import models

    if spec in models.names():
        what = "folder" if os.path.isdir(spec) else "file"
        target.notes.append(f"'{spec}' is the {what} {os.path.join('.', spec)}, not the zoo model of that name; "
                            f"write {ZOO_PREFIX}{spec} for the zoo model")


def torch_loading():
    """``flopcount.torch_loading`` (PyTorch modules, .pt2 archives, pickles refused)."""
    from . import torch_loading as module

    return module


def jax_loading():
    """``flopcount.jax_loading`` (JAX functions and Flax modules; jax itself imported only to trace)."""
    from . import jax_loading as module

    return module


def jax_loading_names() -> tuple:
    """The frameworks ``framework=`` names."""
    return jax_loading().FRAMEWORKS


def specialize(target: Target, specs: list | None = None, **options) -> Target:
    """A PyTorch module's Target captured for its inputs (see ``torch_loading.specialize``), a
    JAX model's traced for them (``jax_loading.specialize``); any other Target as it is."""
    if target.kind == JAX:
        return jax_loading().specialize(target, specs, **options)
    if target.kind != TORCH:
        return target
    return torch_loading().specialize(target, specs, **options)


def in_dtype(target: Target, dtype) -> Target:
    """``target`` with its model's floating parameters and buffers, and its floating inputs, in
    ``dtype`` (a floating dtype or its name: ``"bf16"``); integer inputs such as token ids keep
    theirs. A Module the caller handed in is converted on a copy, so theirs stays as it is. A
    graph (a model file, a PyTorch capture) keeps the dtypes it was made with: refused.

    >>> import flopcount.runtime as rt
    >>> t = in_dtype(Target(rt.nn.Linear(2, 2), "", OBJECT), "bf16")
    >>> t.model.weight.dtype
    flopcount.bfloat16
    """
    dtype = float_dtype(dtype)
    model = _module_to_change(target, f"dtype {dtype.name}", "which keeps the dtypes it was made with "
                                                             "(convert the model before exporting it)")
    model.to(dtype)  # floating tensors only, as Module.to(dtype) in PyTorch
    expected = None if target.expected is None else [
        replace(s, dtype=dtype.name) if get_dtype(s.dtype).is_floating_point else s for s in target.expected]
    return replace(target, model=model, expected=expected)


def with_weights(target: Target, fmt) -> Target:
    """``target`` with its Linear weights stored in weight format ``fmt`` (``"int4"``,
    ``"int8"``, ``"fp8"``, ``"int4:g64"``: see ``flopcount.runtime.quantization``). A Module the
    caller handed in is quantized on a copy; a graph keeps the weights it was made with."""
    from .runtime.quantization import quantize_weights, weight_format

    fmt = weight_format(fmt)  # a bad spec fails before anything is copied
    model = _module_to_change(target, f"weights {fmt}", "whose weights are stored as they were exported "
                                                        "(quantize the model before exporting it)")
    return replace(target, model=quantize_weights(model, fmt))


def _module_to_change(target: Target, what: str, why_not: str):
    """The Module that ``in_dtype``/``with_weights`` may convert: a copy of one the caller handed
    in (theirs stays as it is), the one built here otherwise; a graph is refused with ``why_not``."""
    model = target.model
    if isinstance(model, Graph) or target.kind in (TORCH, PT2, JAX):
        raise errors.FlopcountError(f"{what}: {target.label or 'this model'} is a graph, {why_not}")
    if target.kind == OBJECT:
        import copy

        model = copy.deepcopy(model)
    return model


def float_dtype(dtype):
    """A floating DType from a DType or a name; anything else is a FlopcountError saying why."""
    value = _dtype_named(dtype)
    if not value.is_floating_point:
        raise errors.FlopcountError(f"dtype {value.name}: the model's weights and activations need a floating "
                                    f"dtype (float32, bfloat16, float16...); integer inputs keep theirs")
    return value


def split_dtype(dtype) -> tuple:
    """``profile(dtype=...)`` (and ``--dtype``) in its two meanings: (the model's floating dtype
    or None, [(input name or None, dtype name)] for the inputs built from shapes).

    A floating dtype is the model's: its weights, activations and floating inputs (token ids stay
    int64). An integer dtype is every input's, and ``{name: dtype}`` one input's: the inputs
    built from shapes, for a model that cannot tell (a factory whose input is token ids).

    >>> split_dtype("bf16")
    (flopcount.bfloat16, [])
    >>> split_dtype("int64"), split_dtype({"input_ids": "int64"})
    ((None, [(None, 'int64')]), (None, [('input_ids', 'int64')]))
    """
    if dtype is None:
        return None, []
    if isinstance(dtype, Mapping):
        return None, [(name, _dtype_named(value).name) for name, value in dtype.items()]
    value = _dtype_named(dtype)
    return (value, []) if value.is_floating_point else (None, [(None, value.name)])


def _dtype_named(dtype):
    try:
        return get_dtype(dtype)
    except TypeError as exc:
        raise errors.FlopcountError(f"dtype: {exc}") from None


def _require_file(path: str) -> None:
    if not os.path.exists(path):
        raise errors.ModelFileError(f"{path}: no such file")
    if os.path.isdir(path):
        raise errors.ModelFileError(f"{path}: is a directory, not a model file")


# --- zoo -------------------------------------------------------------------------------------

def load_zoo(name: str, device) -> Target:
    from . import models

    entry = models.info(name)   # an unknown name raises, suggesting the closest ones
    if str(device) != "meta":
        _check_weights_fit(name, device)
    with default_device(device):
        net = models.get(name)
    return Target(net, name, ZOO, built_inputs(entry))


def _check_weights_fit(name: str, device) -> None:
    """Refuse, before building, a zoo model whose weights do not fit in the memory this process
    can still take on ``device`` (its meta twin, built in milliseconds, has their sizes)."""
    from . import models
    from .runtime.host_memory import check_fits

    with default_device("meta"):
        twin = models.get(name)
    weights = sum(t.nbytes for t in list(twin.parameters()) + list(twin.buffers()))
    where = "the CPU" if str(device) == "cpu" else str(device)
    check_fits(weights, f"{name}'s weights on {where}", "counting needs shapes only (device 'meta', which the "
                                                        "command line takes without --latency)", device=device)


# --- native files ----------------------------------------------------------------------------

def load_native(path: str, device, zoo_device=None) -> Target:
    from .runtime.io import load as load_graph
    from .runtime.io import sniff

    _require_file(path)
    for fmt in file_formats.FORMATS:   # the formats a frontend knows by content, whatever the file's name
        if fmt.recognises(path):
            return fmt.load(path, device, zoo_device)
    for fmt in file_formats.FORMATS:
        if fmt.suffix and path.lower().endswith(fmt.suffix):
            raise errors.ModelFileError(f"{path}: not {fmt.name} ({fmt.signature})")
    kind = sniff.sniff(path)
    if kind in (sniff.TORCH_PICKLE, sniff.PICKLE):
        torch_loading().refuse_pickle(path, kind)
    if kind == sniff.PT2:
        return torch_loading().load_pt2(path, device, [])
    if kind == sniff.DAMAGED_ZIP:
        raise errors.ModelFileError(f"{path}: a zip archive that cannot be read (truncated or damaged)")
    if kind == sniff.ZIP:
        raise errors.ModelFileError(f"{path}: a zip archive that is no model file flopcount reads (a Keras 3 "
                                    f"file has config.json and a metadata.json naming keras_version; a PyTorch "
                                    f"one data.pkl)")
    if kind == sniff.SAFETENSORS and sniff.safetensors_metadata(path).get("format") not in (None, "flopcount"):
        return _weights_file(path, device, zoo_device)
    graph = load_graph(path)
    target = Target(graph, os.path.basename(path), NATIVE, graph_inputs(graph), fixed=True, path=path)
    if any(graph.tensors[name].data is None for name in graph.parameters):
        # saved from a meta model: shapes only, so it is counted on the meta device
        target.device = "meta"
        if str(device) != "meta":
            target.notes.append(f"{target.label} was saved without weights: counted on the meta device, not run")
    else:
        target.model = placed(graph, device)
    return target


# --- Hugging Face folders --------------------------------------------------------------------

def load_hf_folder(path: str, device) -> Target:
    """A folder with ``config.json`` (see ``models/_hf_folder.py``): built natively on meta to
    count (``device="meta"``), with its weights otherwise; other architectures as a PyTorch
    module, captured once the inputs are known."""
    from .models import _hf_folder

    if not _hf_folder.is_folder(path):
        raise errors.ModelFileError(f"{path}: is a directory, not a model file (a Hugging Face model folder "
                                    f"has a config.json)")
    folder = _hf_folder.load(path, weights=str(device) != "meta")
    label = os.path.basename(os.path.normpath(path))
    if folder.torch:
        target = torch_loading().load_module(folder.model, label, path)
        target.expected, target.notes = built_inputs(folder), list(folder.notes)
        return target
    return built_target(folder, label, HF, path)


def _weights_file(path: str, device, zoo_device) -> Target:
    """A safetensors file of weights alone (``save_pretrained``'s): its folder when that is a
    Hugging Face folder, else one line saying what is missing."""
    from .models import _hf_folder

    folder = os.path.dirname(os.path.abspath(path))
    if not _hf_folder.is_folder(folder):
        raise errors.ModelFileError(
            f"{path}: holds weights only (safetensors written by PyTorch or save_pretrained), not a model; "
            f"flopcount needs the architecture too: the config.json beside it (a Hugging Face folder), or "
            f"the model itself (flopcount.profile(model, example_input))")
    target = load_hf_folder(folder, zoo_device or device)
    target.notes.insert(0, f"{os.path.basename(path)} holds weights only: profiling its folder "
                           f"{os.path.basename(folder)}, which has a config.json")
    return target


# --- ONNX files ------------------------------------------------------------------------------

def onnx_module(path: str):
    """``flopcount.runtime.onnx``, or a one-line error naming what is missing."""
    try:
        from .runtime import onnx as onnx_io
        import onnx  # noqa: F401  (the importer needs it; say so before reading anything)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or ""
        if missing == "onnx" or missing.startswith("onnx."):
            raise errors.ModelFileError(f"{path}: reading ONNX files needs the onnx package: {ONNX_INSTALL}") from None
        raise errors.ModelFileError(f"{path}: ONNX import is not available in this version of flopcount") from None
    return onnx_io


def load_onnx(path: str, device, given: list, batch: int | None = None, values: dict | None = None) -> Target:
    """Import an ONNX file, its symbolic dims bound from ``given`` [(name or None, dims)] and
    ``batch``, its shape-carrying inputs from ``values``; when they cannot be bound, the error
    lists the file's inputs (or says which values are needed)."""
    _require_file(path)
    onnx_io = onnx_module(path)
    from .runtime.onnx.symbolic import InputShapeError, InputValueError

    try:
        with naming_errors(path, keep=(InputValueError, InputShapeError)):
            # on meta, the importer makes no arrays for the weights at all
            graph = onnx_io.load(path, input_shapes=onnx_binding(path, given, batch),
                                 device="meta" if str(device) == "meta" else None, input_values=values)
    except InputValueError as exc:
        what = str(exc).rsplit("; bind them", 1)[0]
        raise option_error(errors.ShapeError, f"{os.path.basename(path)}: {what}; give their values: ",
                           Option("input_values", {n: ... for n in exc.names})) from exc
    except InputShapeError as exc:
        hint = _onnx_hint(path, example=not given and batch is None)
        raise option_error(errors.ShapeError, f"{os.path.basename(path)}: {exc}; ", *hint) from exc
    return graph_file_target(graph, path, ONNX, device)


def _onnx_hint(path: str, example: bool) -> tuple:
    # what the file takes, and (when nothing was given) the shapes to give: unknown dims shown as 1
    from .runtime import onnx as onnx_io

    declared = onnx_io.inputs(path)
    listed = ", ".join(f"{i.name} [{', '.join('?' if d is None else str(d) for d in i.dims or [])}]" for i in declared)
    shapes = [(i.name, tuple(d if isinstance(d, int) else 1 for d in i.dims)) for i in declared if i.dims]
    if example and shapes:
        return f"the file's inputs are {listed}; give their shapes, e.g. ", Option("input_shape", shapes)
    return (f"the file's inputs are {listed}",)


def onnx_binding(path: str, given: list, batch: int | None):
    """``input_shapes`` for the ONNX importer: a dict by name, or a list in input order. With
    ``batch``, every input whose other dims are known gets that first dimension."""
    from .runtime import onnx as onnx_io

    named = {name: dims for name, dims in given if name is not None}
    positional = [dims for name, dims in given if name is None]
    if batch is None:
        if not given:
            return None
        if named and positional:
            raise errors.ShapeError("for an ONNX model give every input shape by name or none by name")
        return named or positional
    shapes = {}
    for i, declared in enumerate(onnx_io.inputs(path)):
        dims = declared.dims or []
        shape = named.pop(declared.name, None) or (positional[i] if i < len(positional) else None)
        if shape is None and dims and all(isinstance(d, int) for d in dims[1:]):
            shape = tuple(dims)
        if shape:
            shapes[declared.name] = (batch,) + tuple(shape[1:])
    shapes.update(named)   # names the file does not have: the importer says which inputs it has
    return shapes


# --- file.py:factory -------------------------------------------------------------------------

def load_factory(spec: str, device, factory_args: dict, framework: str | None = None) -> Target:
    """Run ``file.py`` (as ``python file.py`` would, its directory importable) and call the
    factory. Whatever goes wrong in the user's code comes back as one ModelFileError. With
    ``framework="jax"`` the factory returns ``(function or Flax module, example_args)``."""
    path, _, attr = spec.rpartition(":") if ".py:" in spec else (spec, "", "")
    if not attr:
        raise errors.ModelFileError(f"{spec}: name the function that builds the model, e.g. {spec}:make_model")
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
        raise errors.ModelFileError(f"{path}: running the file failed: {_describe(exc)}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == module.__name__)
        hint = f"; it defines {', '.join(found)}" if found else ""
        raise errors.ModelFileError(f"{path} has no function {attr!r}{hint}")
    try:
        with default_device(device):
            model = factory(**factory_args)
    except (Exception, SystemExit) as exc:
        raise errors.ModelFileError(f"{spec} raised {_describe(exc)}") from exc
    label = f"{os.path.basename(path)}:{attr}"
    if framework == "jax" or (isinstance(model, tuple) and model and jax_loading().is_model(model[0])):
        return jax_loading().from_factory(model, spec, label)
    if rt_torch.is_module(model):
        return torch_loading().load_module(model, label)
    if isinstance(model, Graph):
        return Target(model, label, FACTORY, graph_inputs(model), fixed=True)
    if not isinstance(model, Module):
        raise errors.ModelFileError(f"{spec} returned {type(model).__name__}, not a flopcount.runtime.nn.Module "
                                    f"or a torch.nn.Module")
    return Target(model, label, FACTORY)


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --- running what a file holds -----------------------------------------------------------------

@contextlib.contextmanager
def file_errors(target: Target):
    """A model file's graph passed every check at load (names, sizes, every shape rule), yet a
    crafted one can still hold attribute values a kernel cannot take: a failure while running
    it is the file's, said in one ModelFileError (the cause stays chained for --debug)."""
    try:
        yield
    except (ArithmeticError, ValueError, TypeError, IndexError, KeyError, RuntimeError) as exc:
        if isinstance(exc, errors.FlopcountError) or target.kind not in (ONNX, NATIVE, *(f.kind for f in file_formats.FORMATS)):
            raise
        text = " ".join(str(exc).split())
        raise errors.ModelFileError(f"{target.path}: running the model failed, the file holds values it cannot "
                                    f"run with ({type(exc).__name__}: {text[:200]})") from exc


# --- inputs of a specialized graph -----------------------------------------------------------

def check_fixed(target: Target, specs: list) -> None:
    """A graph runs only on the shapes it was made for: say which when they differ."""
    if not target.fixed:
        return
    want = [(tuple(s.shape), s.dtype) for s in target.expected]
    got = [(tuple(s.shape), s.dtype) for s in specs]
    if want != got:
        raise errors.ShapeError(
            f"{target.name} takes " + (", ".join(s.describe() for s in target.expected) or "no inputs")
            + " (a model file is fixed to the shapes it was saved with); got "
            + (", ".join(s.describe() for s in specs) or "none"))


__all__ = ["Target", "kind_of", "zoo_name", "load", "specialize", "load_hf_folder", "file_errors", "load_zoo", "load_native", "load_onnx", "load_factory", "check_fixed",
           "graph_inputs", "onnx_binding", "onnx_module"]
