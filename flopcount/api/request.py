"""What ``profile()`` was asked, checked once before anything loads or runs: a frozen
:class:`ProfileRequest` made by :func:`request_from`. Every option is validated here, in the
order ``profile()`` documents (a bad mode, convention, device, hardware, dtype, weight format or
engine fails before the model is read), and the inputs are put in one form: a shape given where
a tensor goes is read as ``input_shape``, and an ONNX file's positional tensors are named as the
file declares its inputs (their data binding the inputs that carry shapes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

from .. import conventions, loading
from ..engines import ENGINES, onnxruntime_engine, torch_engine
from ..hardware import get as hardware_profile
from ..inputs import given_shapes
from ..runtime import errors
from ..runtime.graph import Graph
from ..runtime.nn.modules.module import Module
from ..runtime.quantization import weight_format as rt_weight_format
from .views import MODES, eager_form


@dataclass(frozen=True)
class ProfileRequest:
    """``profile()``'s arguments, validated and normalised (see ``profile`` for each option).

    ``options`` holds every keyword option as given, and ``request.<option>`` reads one
    (``request.latency``, ``request.threads``): an option that needs no checking or new form
    lives in ``profile()``'s signature and the command line alone. The fields are what this
    module made of them: ``args``/``kwargs`` are the tensors given (an ONNX file's by input
    name), ``given`` the shapes [(input name or None, shape)] from ``input_shape`` or from those
    tensors, ``values`` the values bound to an ONNX file's inputs that carry shapes;
    ``counting`` is the convention, ``hardware`` the Profile (or None), ``dtype`` the floating
    dtype the model runs in and ``input_dtypes`` those of inputs built from shapes; ``device``
    where it runs (``"cpu"`` unless given), ``zoo_device`` ``"meta"`` when a zoo model is only
    counted; ``say`` reports each step."""

    model: object
    args: tuple
    kwargs: dict
    given: list
    values: dict
    onnx_file: bool
    device: str
    zoo_device: str
    counting: conventions.Convention
    hardware: object
    dtype: object
    input_dtypes: list
    weight_format: object
    options: Mapping[str, Any] = field(repr=False)
    say: Callable[[str], None] = field(repr=False)

    def __getattr__(self, name: str) -> Any:
        # only reached for names that are not fields: the options as given
        options = self.__dict__.get("options", {})
        if name in options:
            return options[name]
        raise AttributeError(f"ProfileRequest has no field or option {name!r}")

    @property
    def timed(self) -> bool:
        """Whether anything is timed: ``latency``, or an engine other than flopcount's."""
        return self.latency or self.engine != "flopcount"


def request_from(model, inputs: tuple, named_inputs: dict, **options) -> ProfileRequest:
    """The :class:`ProfileRequest` of ``profile(model, *inputs, **options, **named_inputs)``, or
    the error of the first option that is wrong (``profile()``'s signature holds the defaults
    and passes every option)."""
    model = eager_form(model)
    mode, engine, device, input_shape = options["mode"], options["engine"], options["device"], options["input_shape"]
    if mode not in MODES:
        raise ValueError(f"profile: mode must be one of {MODES}, got {mode!r}")
    counting = conventions.get(options["convention"])
    _check_device(device)
    hardware = options["hardware"]
    profile_of = hardware_profile(hardware) if hardware is not None else None  # a bad name fails first
    dtype, input_dtypes = loading.split_dtype(options["dtype"])
    weights = options["weights"]
    weight_format = rt_weight_format(weights) if weights is not None else None  # a bad spec fails first
    if engine not in ENGINES:
        raise errors.FlopcountError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine in (torch_engine.NAME, onnxruntime_engine.NAME) and (dtype is not None or weight_format is not None):
        # the engine would time the model as it is, beside counts of a converted copy
        timed, yours = ("PyTorch model", "torch module") if engine == torch_engine.NAME else ("ONNX file", "file")
        raise errors.FlopcountError(f"engine {engine!r} times the {timed} as it is; dtype and weights "
                                    f"convert flopcount's copy only (got dtype={getattr(dtype, 'name', None)!r}, "
                                    f"weights={weights!r}): convert the {yours} yourself, or use engine 'flopcount'")
    if inputs and not named_inputs and input_shape is None and all(is_shape(x) for x in inputs):
        # profile(net, (1, 3, 224, 224)): a shape where a tensor goes, as peers take it
        input_shape, inputs = (tuple(inputs[0]) if len(inputs) == 1 else [tuple(x) for x in inputs]), ()
    given = given_shapes(input_shape)
    if not given and not isinstance(model, (Module, Graph)):
        given = _shapes_of(inputs, named_inputs)
    values = dict(options["input_values"] or {})
    onnx_file = isinstance(model, (str, os.PathLike)) and loading.kind_of(os.fspath(model)) == loading.ONNX
    if onnx_file and (inputs or named_inputs):
        # the tensors given bind the values of the inputs that carry shapes; by name from here on
        named_inputs = {**_by_declared_name(os.fspath(model), inputs), **named_inputs}
        inputs = ()
        values.update((k, t.numpy()) for k, t in named_inputs.items() if k not in values and t.data is not None)
    # counting needs shapes only: a zoo model that nothing runs is built on the meta device
    only_counted = device is None and not (options["latency"] or options["measure_memory"] or inputs or named_inputs)
    return ProfileRequest(
        model=model, args=tuple(inputs), kwargs=dict(named_inputs), given=given, values=values, onnx_file=onnx_file,
        device=device or "cpu", zoo_device="meta" if only_counted else device or "cpu", counting=counting,
        hardware=profile_of, dtype=dtype, input_dtypes=input_dtypes, weight_format=weight_format,
        options=MappingProxyType(dict(options)), say=options["progress"] or (lambda step: None))


def is_shape(value) -> bool:
    """A tuple or list of non-negative ints (not bools): a shape given where an input goes."""
    return (isinstance(value, (tuple, list)) and len(value) > 0
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value))


def _check_device(device) -> None:
    """Fail early, in one line, when ``device`` cannot be used (CUDA without CuPy or a GPU)."""
    from ..runtime.device import backend, device as parse_device

    if device is not None and str(device) not in ("cpu", "meta"):
        backend(parse_device(device))


def _by_declared_name(path: str, args: tuple) -> dict:
    """Positional tensors for an ONNX file, named as the file declares its inputs."""
    declared = [i.name for i in loading.onnx_module(path).inputs(path)] if args else []
    if len(args) > len(declared):
        raise errors.ShapeError(f"{path} takes {len(declared)} input(s) {declared}, got {len(args)} tensors")
    return dict(zip(declared, args))


def _shapes_of(args: tuple, kwargs: dict) -> list:
    """[(name or None, shape)] of the tensors given: they bind an ONNX file's symbolic dims."""
    from ..runtime.tensor import Tensor

    return ([(None, tuple(a.shape)) for a in args if isinstance(a, Tensor)]
            + [(k, tuple(v.shape)) for k, v in kwargs.items() if isinstance(v, Tensor)])


__all__ = ["ProfileRequest", "request_from", "is_shape"]
