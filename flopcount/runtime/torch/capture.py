"""Capturing a ``torch.nn.Module`` as an ATen graph, ready for the importer.

1. ``torch.export.export`` (non-strict), then ``run_decompositions({})``: functional ATen
   (no in-place ops, no aliasing) with the high-level ops kept (``linear``, ``conv2d``,
   ``scaled_dot_product_attention``, ``layer_norm``), each node with its ``nn_module_stack``;
2. where export refuses (data-dependent Python control flow, ``.item()``, untraceable
   objects), one eager run of the model on the example inputs is recorded op by op at the ATen
   level (``record.py``): the graph is then specialized to the example's values, and a note
   says so and why export failed.

Either way the model is left as it was: training flag, parameters, buffers (a recorded
training-mode run would update batch-norm statistics: they are put back).
"""

from __future__ import annotations

import contextlib
import warnings

from ..errors import FlopcountError
from ..optional import require
from .captured import Captured


def require_torch():
    """``torch``, or a one-line error saying what to install."""
    return require("torch", "PyTorch models need torch: pip install 'flopcount[torch]'")


@contextlib.contextmanager
def quiet_export():
    """torch.export itself (torch 2.13) still calls a pytree check it deprecates, warning on every
    ResNet-sized model: a message about torch's internals that the user has nothing to act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning)
        yield


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line[:200]}" if line else type(exc).__name__


def capture(module, args: tuple, kwargs: dict, *, train: bool = False) -> Captured:
    """The ATen graph of ``module(*args, **kwargs)`` (torch tensors), in train or eval mode."""
    torch = require_torch()
    name = type(module).__name__
    was_training = module.training
    module.train(train)
    kwargs = _without_cache(module, kwargs)
    try:
        try:
            with quiet_export():
                program = torch.export.export(module, tuple(args), dict(kwargs), strict=False)
                program = program.run_decompositions({})
        except Exception as exc:  # export refused the model: record an eager run instead
            from .record import record

            reason = _first_line(exc)
            captured = record(module, tuple(args), dict(kwargs))
            captured.notes.insert(0, f"torch.export could not capture {name} ({reason}); captured instead by "
                                     f"recording the ATen ops of one run on the example inputs, so the graph is "
                                     f"specialized to their values")
            return captured
        captured = from_program(program, name)
        # every module, in the model's order, also those no op ran in (an unused auxiliary head)
        modules = {path: type(m).__name__ for path, m in module.named_modules()}
        captured.module_types = {**modules, **captured.module_types}
        return captured
    finally:
        module.train(was_training)


def _without_cache(module, kwargs: dict) -> dict:
    """A transformers decoder returns its KV cache, an object torch.export cannot return; the
    forward is captured without one (``use_cache=False``), as a single call computes the same."""
    import inspect

    try:
        takes = "use_cache" in inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return kwargs
    if takes and "use_cache" not in kwargs and getattr(getattr(module, "config", None), "use_cache", False):
        return {**kwargs, "use_cache": False}
    return kwargs


def from_program(program, name: str = "model") -> Captured:
    """Captured from a ``torch.export.ExportedProgram`` (functional ATen expected)."""
    from torch.export.graph_signature import InputKind, OutputKind

    from .importer import class_name, module_path, spec_of

    signature = program.graph_signature
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    params, inputs, specs, constants = {}, [], [], {}
    for spec in signature.input_specs:
        arg_name = getattr(spec.arg, "name", None)
        if spec.kind == InputKind.USER_INPUT:
            value = placeholders[arg_name].meta.get("val") if arg_name in placeholders else None
            if not hasattr(value, "shape"):   # a Python value (use_cache=False): the graph is specialized to it
                if arg_name in placeholders:
                    constants[arg_name] = getattr(spec.arg, "value", value)
                continue
            if any(not isinstance(d, int) for d in value.shape):
                raise FlopcountError(f"{name}: input {arg_name!r} has symbolic dims {list(value.shape)}")
            inputs.append(arg_name)
            specs.append(spec_of(value))
        elif spec.kind == InputKind.PARAMETER:
            params[arg_name] = (spec.target, program.state_dict[spec.target], "param")
        elif spec.kind == InputKind.BUFFER:
            source = program.state_dict if spec.persistent else program.constants
            params[arg_name] = (spec.target, source[spec.target], "buffer")
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            params[arg_name] = (spec.target, program.constants[spec.target], "const")
        else:
            raise FlopcountError(f"{name}: the exported program takes a {spec.kind.name.lower()} input "
                                 f"({arg_name!r}), which flopcount does not support")
    output_node = next(n for n in program.graph.nodes if n.op == "output")
    flat_outputs = list(output_node.args[0])
    outputs = [value for value, spec in zip(flat_outputs, signature.output_specs)
               if spec.kind == OutputKind.USER_OUTPUT]
    types = {}
    for node in program.graph.nodes:
        for path, kind in (node.meta.get("nn_module_stack") or {}).values():
            types.setdefault(module_path(path), class_name(kind))
    return Captured(program.graph, params, inputs, specs, outputs, name, types, constants=constants)


__all__ = ["Captured", "capture", "from_program", "require_torch"]
