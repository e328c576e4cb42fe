"""Keras 3 ``.keras`` files: a zip of ``config.json`` (the architecture), ``metadata.json`` (the
Keras version) and ``model.weights.h5`` (the weights).

The config is read as JSON and every layer rebuilt with flopcount's modules
(``_keras_layers.py``): Keras is never imported and nothing in the file runs. A ``Lambda`` layer
(Python code in the file) or any layer that is not one of Keras' built-in ones is named and
refused. Sequential and Functional models are rebuilt; the module of each layer has the layer's
Keras name, so the rows read like ``model.summary()``. Weights are read with h5py (only to run
the model: counting builds it on the meta device and reads none).

    loaded = load("mnist_cnn.keras", weights=False)
    loaded.model, loaded.inputs       # a Sequential (a KerasModel) on meta, [("input_layer", (28, 28, 1), "float32", None)]
"""

from __future__ import annotations

import io
import keyword
import re
import zipfile
from dataclasses import dataclass, field

from ..runtime import errors
from ..runtime.device import CPU
from ..runtime.dtypes import get_dtype
from ..runtime.graph.tree import leaves_of
from ..runtime.io.files import open_model_file
from ..runtime.io.json_text import parse_json
from ..runtime.io.sniff import ZIP_MAGIC
from ..runtime.nn.modules.module import Module
from . import _keras_layers

H5PY_INSTALL = "pip install h5py"
CONFIG, METADATA, WEIGHTS = "config.json", "metadata.json", "model.weights.h5"
JSON_LIMIT = 64 << 20          # a config.json larger than this is not one Keras wrote
METADATA_LIMIT = 1 << 20       # its metadata.json is a few dozen bytes
UNKNOWN_LENGTH = 128           # a sequence axis the InputLayer leaves open (None) gets this length
UNKNOWN_SIZE = 224             # another open axis (an image's height or width) gets this size
_MODELS = ("Sequential", "Functional", "Model")


@dataclass
class KerasFile:
    """A loaded ``.keras`` file: the model, its inputs as (name, shape without batch, dtype,
    high) and notes for the user."""

    model: Module
    inputs: list
    notes: list = field(default_factory=list)


@dataclass(frozen=True)
class Ref:
    """A Keras tensor in the config: output ``index`` of call ``node`` of layer ``layer``."""

    layer: str
    node: int
    index: int


class KerasModel(Module):
    """A Sequential or Functional model: its layers as child modules named as in Keras, called
    in the order of the config's graph (``calls``: [(layer, node, args, kwargs)] with
    :class:`Ref` where a tensor goes)."""

    def __init__(self, name: str, inputs: list, calls: list, outputs: list):
        super().__init__()
        self.keras_name, self.input_names, self.calls, self.outputs = name, inputs, calls, outputs

    def forward(self, *inputs, **named):
        if len(inputs) > len(self.input_names):
            raise errors.ShapeError(f"{self.keras_name} takes {len(self.input_names)} input(s) "
                                    f"({', '.join(self.input_names)}), got {len(inputs)}")
        given = dict(zip(self.input_names, inputs))
        for name, value in named.items():
            if name not in self.input_names:
                raise errors.ShapeError(f"{self.keras_name} has no input {name!r} (its inputs: "
                                        f"{', '.join(self.input_names)})")
            if name in given:
                raise errors.ShapeError(f"{self.keras_name}: input {name!r} given twice, by position and by name")
            given[name] = value
        missing = [n for n in self.input_names if n not in given]
        if missing:
            raise errors.ShapeError(f"{self.keras_name} needs its input {missing[0]!r}")
        values = {(name, 0): (tensor,) for name, tensor in given.items()}

        def resolve(item):
            return _map_refs(item, lambda ref: values[(ref.layer, ref.node)][ref.index])

        for layer, node, args, kwargs in self.calls:
            out = self._modules[layer](*resolve(args), **resolve(kwargs))
            values[(layer, node)] = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        results = [resolve(ref) for ref in self.outputs]
        return results[0] if len(results) == 1 else tuple(results)

    def extra_repr(self) -> str:
        return self.keras_name


class Sequential(KerasModel):
    """A Keras Sequential model (its type in a report, as ``model.summary()`` names it)."""


class Functional(KerasModel):
    """A Keras Functional model, ``keras.Model(inputs, outputs)``."""


def _map_refs(item, replace):
    """``item`` with every Ref in its lists, tuples (made lists) and dicts replaced by ``replace(ref)``."""
    if isinstance(item, Ref):
        return replace(item)
    if isinstance(item, (list, tuple)):
        return [_map_refs(i, replace) for i in item]
    if isinstance(item, dict):
        return {k: _map_refs(v, replace) for k, v in item.items()}
    return item


# --- the archive -----------------------------------------------------------------------------------

def _read_json(archive: zipfile.ZipFile, name: str, path: str) -> dict:
    info = archive.getinfo(name)
    if info.file_size > JSON_LIMIT:
        raise errors.ModelFileError(f"{path}: its {name} is {info.file_size} bytes, too large for a Keras config")
    try:
        data = parse_json(archive.read(name))
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.ModelFileError(f"{path}: its {name} is not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise errors.ModelFileError(f"{path}: its {name} is not a JSON object")
    return data


def is_keras(path: str) -> bool:
    """Whether the file at ``path`` is a Keras 3 archive: a zip holding ``config.json`` and a
    ``metadata.json`` that names a ``keras_version`` (the listing and that small file are read)."""
    with open_model_file(path) as f:
        if f.read(4) != ZIP_MAGIC:
            return False
        try:
            with zipfile.ZipFile(f) as archive:
                names = archive.namelist()
                if CONFIG not in names or METADATA not in names or archive.getinfo(METADATA).file_size > METADATA_LIMIT:
                    return False
                metadata = parse_json(archive.read(METADATA))
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, UnicodeDecodeError):
            return False
    return isinstance(metadata, dict) and "keras_version" in metadata


def read(path: str) -> tuple:
    """(config, metadata) of a ``.keras`` archive, both JSON objects (the weights are read
    apart, and only to run the model: :func:`weight_store`)."""
    with open_model_file(path) as f:
        try:
            with zipfile.ZipFile(f) as archive:
                names = set(archive.namelist())
                for needed in (CONFIG, METADATA):
                    if needed not in names:
                        raise errors.ModelFileError(f"{path}: a Keras file holds {needed}, this zip does not")
                config, metadata = _read_json(archive, CONFIG, path), _read_json(archive, METADATA, path)
        except (zipfile.BadZipFile, EOFError, OSError) as exc:
            raise errors.ModelFileError(f"{path}: not a readable Keras archive ({exc})") from None
    return config, metadata


def weight_store(path: str):
    """The h5py File of the archive's ``model.weights.h5``, read into memory."""
    try:
        import h5py
    except ImportError:
        raise errors.ModelFileError(f"{path}: reading a Keras file's weights needs h5py: {H5PY_INSTALL} (or count "
                                    f"without weights: no --latency)") from None
    with open_model_file(path) as f:
        try:
            with zipfile.ZipFile(f) as archive:
                if WEIGHTS not in archive.namelist():
                    raise errors.ModelFileError(f"{path}: has no {WEIGHTS} (weights saved apart, sharded, or "
                                                f"not at all); count it without weights (no --latency)")
                raw = archive.read(WEIGHTS)
        except (zipfile.BadZipFile, EOFError, OSError) as exc:
            raise errors.ModelFileError(f"{path}: its {WEIGHTS} is not readable ({exc})") from None
    try:
        return h5py.File(io.BytesIO(raw), "r")
    except OSError as exc:
        raise errors.ModelFileError(f"{path}: its {WEIGHTS} is not an HDF5 file ({exc})") from None


# --- the graph of layers -------------------------------------------------------------------------

def _refuse_custom(path: str, layer: dict) -> None:
    kind, name = layer.get("class_name"), layer.get("config", {}).get("name", layer.get("name"))
    module, registered = layer.get("module"), layer.get("registered_name")
    if kind in _MODELS and module in ("keras", "keras.models", "keras.src.models.functional",
                                      "keras.src.models.sequential") and registered in (None, kind):
        return   # a Sequential or Functional model used as a layer: rebuilt as one
    if kind == "Lambda":
        raise errors.UnsupportedOpError(f"{path}: layer {name!r} is a Lambda layer (Python code stored in the "
                                        f"file), which flopcount never runs; nothing was loaded")
    if module != "keras.layers" or registered not in (None, kind):
        raise errors.UnsupportedOpError(f"{path}: layer {name!r} is {registered or kind} from {module!r}, not a "
                                        f"built-in Keras layer (its code is not in the file and flopcount never "
                                        f"imports it); nothing was loaded")
    if kind not in _keras_layers.LAYERS and kind != "InputLayer":
        raise errors.UnsupportedOpError(f"{path}: layer {name!r} is a Keras {kind}, which flopcount does not "
                                        f"rebuild yet (it rebuilds {', '.join(sorted(_keras_layers.LAYERS))})")


def _tensor_ref(item, path: str):
    """A node argument with every serialized Keras tensor made a Ref."""
    if isinstance(item, dict) and item.get("class_name") == "__keras_tensor__":
        history = item.get("config", {}).get("keras_history")
        if not (isinstance(history, list) and len(history) == 3 and isinstance(history[0], str)
                and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in history[1:])):
            raise errors.ModelFileError(f"{path}: a layer's input names no layer ({history!r})")
        return Ref(*history)
    if isinstance(item, list):
        return [_tensor_ref(i, path) for i in item]
    if isinstance(item, dict):
        return {k: _tensor_ref(v, path) for k, v in item.items()}
    return item


def _first_shape(item):
    """The shape of the first Keras tensor in a serialized node argument."""
    if isinstance(item, dict) and item.get("class_name") == "__keras_tensor__":
        return item.get("config", {}).get("shape")
    for value in (item if isinstance(item, list) else item.values() if isinstance(item, dict) else ()):
        shape = _first_shape(value)
        if shape is not None:
            return shape
    return None


def _input_shape(layer: dict):
    build = layer.get("build_config") or {}
    if isinstance(build.get("shapes_dict"), dict):
        return build["shapes_dict"]   # a layer of several named inputs (MultiHeadAttention)
    shape = build.get("input_shape")
    if shape is None:
        shape = _first_shape(layer.get("inbound_nodes") or [])
    while isinstance(shape, list) and shape and isinstance(shape[0], list):
        shape = shape[0]   # a merge layer's first input
    return tuple(shape) if isinstance(shape, list) else None


def _output_refs(value) -> list:
    """``input_layers`` / ``output_layers``: one [name, node, index] or a list of them."""
    if isinstance(value, list) and len(value) == 3 and isinstance(value[0], str):
        return [Ref(*value)]
    if isinstance(value, list) and all(isinstance(v, list) and len(v) == 3 for v in value):
        return [Ref(*v) for v in value]
    if isinstance(value, dict):
        return [r for v in value.values() for r in _output_refs(v)]
    raise ValueError(f"not a list of [layer, node, index]: {value!r}")


def _graph(path: str, kind: str, config: dict) -> tuple:
    """(layers [(layer config, is it a model input)], calls, input names, output refs) of a
    Sequential or Functional config, calls in an order where every input comes first."""
    layers = config.get("layers")
    if not isinstance(layers, list) or not all(isinstance(l, dict) for l in layers):
        raise ValueError("its config has no list of layers")
    for layer in layers:
        if not isinstance(layer.get("class_name"), str) or not isinstance(layer.get("config"), dict):
            raise ValueError(f"a layer has no class name or config ({str(layer)[:80]})")
        if not isinstance(layer.get("build_config"), (dict, type(None))):
            raise ValueError(f"a {layer['class_name']} layer's build_config is not an object")
    if kind == "Sequential":
        inputs = [l for l in layers if l.get("class_name") == "InputLayer"][:1]
        body = [l for l in layers if l.get("class_name") != "InputLayer"]
        if not inputs:   # a Sequential built without an Input: its build shape
            shape = config.get("build_input_shape") or (body and _input_shape(body[0]))
            if not shape:
                raise ValueError("the Sequential model was saved unbuilt (no input shape)")
            inputs = [{"module": "keras.layers", "class_name": "InputLayer", "config": {"name": "input_layer", "batch_shape": list(shape)}}]
        source = Ref(_name(inputs[0]), 0, 0)
        calls = []
        for layer in body:
            calls.append((_name(layer), 0, [source], {}))
            source = Ref(_name(layer), 0, 0)
        return inputs + body, calls, [_name(inputs[0])], [source]
    by_name, calls = {}, []
    for layer in layers:
        name = _name(layer)
        if name in by_name:
            raise ValueError(f"two layers are named {name!r}")
        by_name[name] = layer
        if layer.get("class_name") == "InputLayer":
            continue
        for node, inbound in enumerate(layer.get("inbound_nodes") or []):
            args, kwargs = _tensor_ref(inbound.get("args", []), path), _tensor_ref(inbound.get("kwargs", {}), path)
            kwargs = {k: v for k, v in kwargs.items() if v is not None and k not in ("training", "mask")}
            _check_call(name, args, kwargs)
            calls.append((name, node, args, kwargs))
    inputs = [r.layer for r in _output_refs(config.get("input_layers"))]
    outputs = _output_refs(config.get("output_layers"))
    for ref in [r for call in calls for r in leaves_of(call[2:], Ref)] + outputs:
        if ref.layer not in by_name:
            raise ValueError(f"a tensor comes from layer {ref.layer!r}, which the config does not have")
    return layers, _ordered(calls, inputs), inputs, outputs


def _check_call(name: str, args, kwargs) -> None:
    """A call as Keras saves one: tensors, or one list of tensors (a merge), then options."""
    first = args[0] if isinstance(args, list) and args else None
    tensors = first if isinstance(first, list) else [first]
    if not tensors or not all(isinstance(t, Ref) for t in tensors) or not all(isinstance(a, Ref) for a in args[1:]):
        raise ValueError(f"layer {name!r} is called on {args!r}, not on tensors")
    if not isinstance(kwargs, dict) or not all(isinstance(v, (Ref, bool, int, float, str)) for v in kwargs.values()):
        raise ValueError(f"layer {name!r} is called with options {kwargs!r}")


def _ordered(calls: list, inputs: list) -> list:
    """``calls`` in an order where each comes after the calls whose outputs it takes."""
    done, ordered, waiting = {(name, 0) for name in inputs}, [], list(calls)
    while waiting:
        ready = [c for c in waiting if all((r.layer, r.node) in done for r in leaves_of(c[2:], Ref))]
        if not ready:
            missing = next(r for c in waiting for r in leaves_of(c[2:], Ref) if (r.layer, r.node) not in done)
            raise ValueError(f"layer {waiting[0][0]!r} takes call {missing.node} of {missing.layer!r}, which "
                             f"nothing makes (a cycle, or an input not declared)")
        ordered.extend(ready)
        done.update((c[0], c[1]) for c in ready)
        waiting = [c for c in waiting if (c[0], c[1]) not in done]
    return ordered


def _name(layer: dict) -> str:
    name = layer.get("name") or (layer.get("config") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {layer.get('class_name')} layer has no name")
    return name


def _module_name(name: str) -> str:
    """The layer's name as a module name: a dot would split the dotted path; a name Module
    itself uses (``training``, ``forward``) gets a trailing underscore."""
    safe = name.replace(".", "_")
    own = ("training", "keras_name", "keras_kind", "keras_layers", "input_names", "calls", "outputs")
    return safe + "_" if hasattr(KerasModel, safe) or safe in own or keyword.iskeyword(safe) else safe


# --- building ----------------------------------------------------------------------------------------

def load(path: str, weights: bool) -> KerasFile:
    """The model of a ``.keras`` file: built on the meta device (``weights=False``, to count) or
    with its weights from ``model.weights.h5`` (to run it)."""
    config, metadata = read(path)
    version = metadata.get("keras_version")
    if not isinstance(version, str) or not version.startswith("3."):
        raise errors.ModelFileError(f"{path}: saved by Keras {version}; flopcount reads the Keras 3 format")
    kind = config.get("class_name")
    if kind not in _MODELS or not isinstance(config.get("config"), dict):
        raise errors.UnsupportedOpError(f"{path}: its config.json holds a model of class {kind!r}; flopcount "
                                        f"rebuilds Sequential and Functional models (a subclassed model's code "
                                        f"is not in the file)")
    model = _model(path, kind, config["config"])
    if weights:
        with weight_store(path) as store:
            _fill(path, store, "", model)
    notes: list = []
    layers, calls = model.keras_layers, model.calls
    declared = {_module_name(_name(l)): l for l in layers if l.get("class_name") == "InputLayer"}
    try:
        specs = [_input_spec(declared[n], n, model, calls, notes) for n in model.input_names if n in declared]
    except (ValueError, TypeError) as exc:
        raise errors.ModelFileError(f"{path}: {exc}") from None
    if len(specs) != len(model.input_names):
        raise errors.ModelFileError(f"{path}: a model input is not an InputLayer ({', '.join(model.input_names)})")
    return KerasFile(model.eval(), specs, notes)


def _model(path: str, kind: str, config: dict) -> KerasModel:
    """A Sequential or Functional config as a KerasModel; a model used as a layer is one too, a
    child named as that layer (its weights under its group: ``layers/functional/layers/...``)."""
    kind = "Functional" if kind == "Model" else kind   # keras.Model(inputs, outputs) is saved so
    try:
        layers, calls, inputs, outputs = _graph(path, kind, config)
    except (ValueError, TypeError, AttributeError, KeyError) as exc:   # a config Keras did not write
        raise errors.ModelFileError(f"{path}: its config.json does not describe a {kind} model "
                                    f"({type(exc).__name__}: {exc})") from None
    for layer in layers:
        _refuse_custom(path, layer)
    names = {_name(l): _module_name(_name(l)) for l in layers}
    calls = [(names[layer], node, _renamed(args, names), _renamed(kwargs, names))
             for layer, node, args, kwargs in calls]
    cls = Sequential if kind == "Sequential" else Functional
    model = cls(config.get("name", kind), [names[n] for n in inputs], calls, _renamed(outputs, names))
    model.keras_kind, model.keras_layers = kind, layers
    for layer in layers:
        if layer.get("class_name") == "InputLayer":
            continue
        if layer.get("class_name") in _MODELS:
            if not isinstance(layer.get("config"), dict):
                raise errors.ModelFileError(f"{path}: nested model {_name(layer)!r} has no config")
            module = _model(path, layer["class_name"], layer["config"])
        else:
            module = _build(path, layer)
        if layer["config"].get("trainable") is False:   # a frozen layer or backbone
            for param in module.parameters():
                param.requires_grad = False
        model.add_module(names[_name(layer)], module)
    return model


def _renamed(item, names: dict):
    return _map_refs(item, lambda ref: Ref(names[ref.layer], ref.node, ref.index))


def _build(path: str, layer: dict):
    name, kind, config = _name(layer), layer["class_name"], layer.get("config")
    shape = _input_shape(layer)
    try:
        if not isinstance(config, dict):
            raise ValueError("no config")
        module = _keras_layers.build(kind, config, shape)
    except errors.UnsupportedOpError as exc:
        raise errors.UnsupportedOpError(f"{path}: layer {name!r}: {exc}") from None
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError, errors.FlopcountError) as exc:
        raise errors.ModelFileError(f"{path}: layer {name!r} ({kind}) has a config flopcount cannot build "
                                    f"({type(exc).__name__}: {exc})") from None
    return module


def _input_spec(layer: dict, name: str, model: KerasModel, calls: list, notes: list) -> tuple:
    config = layer.get("config") or {}
    shape = config.get("batch_shape") or config.get("batch_input_shape")
    if not isinstance(shape, list) or len(shape) < 1:
        raise ValueError(f"input {name!r} has no batch_shape")
    dtype = config.get("dtype", "float32")
    dtype = dtype.get("config", {}).get("name", "float32") if isinstance(dtype, dict) else dtype
    try:
        dtype = get_dtype(dtype).name
    except TypeError:
        raise ValueError(f"input {name!r} has dtype {dtype!r}, not one flopcount knows") from None
    integer = not get_dtype(dtype).is_floating_point
    fed = [model._modules[layer_] for layer_, _, args, _ in calls if Ref(name, 0, 0) in leaves_of(args, Ref)]
    high = next((m.vocabulary for m in fed if isinstance(m, _keras_layers.Embedding)), None)
    dims = []
    for axis, dim in enumerate(shape[1:]):
        if dim is None:
            dim = UNKNOWN_LENGTH if integer or len(shape) == 3 else UNKNOWN_SIZE
            notes.append(f"input {name!r} leaves axis {axis + 1} open: {dim} taken (give --input-shape to change it)")
        dims.append(int(dim))
    return name, tuple(dims), dtype, high


# --- weights ---------------------------------------------------------------------------------------

def _snake_case(name: str) -> str:
    """Keras' ``naming.to_snake_case``: the group a layer's weights are saved under."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def weight_groups(kind: str, layers: list) -> dict:
    """{layer name: the h5 group of its variables}. Keras saves ``model.layers`` in order, each
    under its class name in snake case made unique (``dense``, ``dense_1``...), not under its
    own name; a Sequential's ``layers`` leave out its InputLayer."""
    used: dict = {}
    groups = {}
    for layer in layers:
        if kind == "Sequential" and layer.get("class_name") == "InputLayer":
            continue
        base = _snake_case(layer.get("class_name", ""))
        count = used.get(base, 0)
        used[base] = count + 1
        groups[_name(layer)] = f"layers/{base}" + (f"_{count}" if count else "")
    return groups


def _fill(path: str, store, prefix: str, model: KerasModel) -> None:
    """Each layer's parameters from ``model.weights.h5``, rearranged to flopcount's layout; a
    nested model's from the groups under its own."""
    layers = {_name(l): l for l in model.keras_layers}
    for name, layer_path in weight_groups(model.keras_kind, model.keras_layers).items():
        if layers[name].get("class_name") == "InputLayer":
            continue
        module = model._modules[_module_name(name)]
        layer_path = prefix + layer_path
        if isinstance(module, KerasModel):
            _fill(path, store, layer_path + "/", module)
            continue
        if not module.keras_weights:
            continue
        layer_group = store.get(layer_path)
        if layer_group is None:
            raise errors.ModelFileError(f"{path}: {WEIGHTS} has no {layer_path} for layer {name!r}")
        saved_name = layer_group["vars"].attrs.get("name") if "vars" in layer_group else None
        if saved_name is not None and str(saved_name) != name:
            raise errors.ModelFileError(f"{path}: {WEIGHTS}'s {layer_path} holds layer {str(saved_name)!r}'s "
                                        f"weights, not {name!r}'s")
        wanted: dict = {}
        for attr, rearrange, place in module.keras_weights:
            group_path, _, index = place.rpartition("/")
            wanted.setdefault(group_path, []).append((attr, rearrange, index))
        for group_path, weights in wanted.items():
            # a sublayer's group is its attribute's name: query_dense, or _query_dense before Keras 3.x
            group = layer_group.get(group_path) or layer_group.get("_" + group_path)
            where = f"{layer_path}/{group_path}"
            if group is None or len(group) != len(weights):
                found = 0 if group is None else len(group)
                raise errors.ModelFileError(f"{path}: layer {name!r} has {found} weight(s) in {WEIGHTS}'s "
                                            f"{where}, its config needs {len(weights)}")
            for attr, rearrange, index in weights:
                _put(path, f"{where}/{index}", name, group.get(index), getattr(module, attr), rearrange, CPU)


def _put(path: str, where: str, name: str, dataset, param, rearrange, cpu) -> None:
    """One saved array into ``param``, checked: floating (or integer for an integer
    parameter) and, once rearranged, of the parameter's shape."""
    import numpy as np

    if dataset is None or not hasattr(dataset, "shape"):
        raise errors.ModelFileError(f"{path}: {where} of layer {name!r} is not an array")
    array = np.asarray(dataset)
    if array.dtype.kind != ("f" if param.dtype.is_floating_point else "i"):
        raise errors.ModelFileError(f"{path}: {where} of layer {name!r} holds {array.dtype}, not the "
                                    f"{param.dtype.name} the layer needs")
    try:
        array = np.array(rearrange(array), order="C")   # 0-d stays 0-d
    except ValueError:
        array = np.empty(0)
    if tuple(array.shape) != tuple(param.shape):
        raise errors.ModelFileError(f"{path}: {where} of layer {name!r} has shape {tuple(dataset.shape)}, which "
                                    f"does not fit the layer's config")
    param.data, param.dtype, param.device = array, get_dtype(array.dtype), cpu


__all__ = ["KerasFile", "KerasModel", "Sequential", "Functional", "Ref", "load", "read", "weight_groups", "H5PY_INSTALL"]
