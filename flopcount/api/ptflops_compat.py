"""ptflops and flowflops compatibility: ``get_model_complexity_info(model, input_res)`` returns
``(macs, params)`` as they report them (``"4.12 GMac"``, ``"25.56 M"``), their hooks as module
rules, and ``per_layer_listing`` their annotated module repr (examples on each).
"""

from __future__ import annotations

import sys
from typing import Callable, cast

from .. import conventions, loading
from ..report import Report
from ..report.units import macs_to_string, params_to_string
from ..runtime import errors
from ..runtime import torch as rt_torch
from ..runtime.graph import Graph
from ..runtime.nn.modules.module import Module
from .request import is_shape
from .views import MODES, eager_form, run_view


def _custom_rule(hook: Callable) -> Callable:
    """A ptflops hook ``hook(module, input, output)`` (adds to ``module.__flops__`` or returns
    a number) as a module rule. It sees specs, which have ``shape``, ``dtype`` and ``numel()``."""

    def rule(module, inputs, output):
        had = "__flops__" in module.__dict__
        saved = module.__dict__.get("__flops__")
        object.__setattr__(module, "__flops__", 0)
        try:
            returned = hook(module, inputs, output)
            counted = returned if isinstance(returned, (int, float)) else module.__dict__["__flops__"]
        finally:
            if had:
                object.__setattr__(module, "__flops__", saved)
            else:
                object.__delattr__(module, "__flops__")
        return conventions.base.macs_only(int(counted))

    return rule


def _inputs_from(model, input_res, input_constructor) -> tuple:
    """(args, kwargs) as flowflops builds them: ``input_constructor(input_res)`` (a dict is
    passed as keyword arguments) or one tensor of shape ``input_res`` (batch included)."""
    from ..runtime import factories

    if input_constructor is not None:
        value = input_constructor(input_res)
        # ptflops passes a dict as keyword arguments and anything else as the arguments; some
        # of them may be flags, but at least one must be a tensor
        if isinstance(value, dict) and any(_is_input(v) for v in value.values()):
            return (), value
        if isinstance(value, (tuple, list)) and any(_is_input(v) for v in value):
            return tuple(value), {}
        if _is_input(value):
            return (value,), {}
        raise errors.FlopcountError(f"input_constructor returned {type(value).__name__} {_short(value)}; expected "
                                    f"a Tensor, a tuple or list of Tensors, or a dict of them by forward's "
                                    f"argument names")
    dtype, device = "float32", None
    if isinstance(model, Module):
        for p in model.parameters():
            dtype, device = p.dtype, p.device
            break
    elif isinstance(model, Graph):
        device = model.device
    return (factories.ones(*tuple(input_res), dtype=dtype, device=device),), {}


def _is_input(value) -> bool:
    from ..runtime.tensor import Tensor

    return isinstance(value, Tensor) or rt_torch.is_tensor(value)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _torch_graph(module, input_res, input_constructor) -> tuple:
    """(Graph, args, kwargs) for a ``torch.nn.Module``: captured on flowflops' input (a tensor of
    ones of shape ``input_res`` in the parameters' dtype, or ``input_constructor(input_res)``),
    and run on inputs of the same shapes made from the graph's specs."""
    from ..inputs import inputs_for

    if input_constructor is not None:
        value = input_constructor(input_res)
        args, kwargs = ((), value) if isinstance(value, dict) else ((value if isinstance(value, tuple) else (value,)), {})
    else:
        import torch

        first = next(module.parameters(), None)
        dtype, device = (first.dtype, first.device) if first is not None else (torch.float32, "cpu")
        args, kwargs = (torch.ones(*tuple(input_res), dtype=dtype, device=device),), {}
    target = loading.specialize(loading.load(module), examples=(args, kwargs))
    graph = cast(Graph, target.model)  # a torch module, specialized: captured into a graph
    return (graph,) + tuple(inputs_for(graph, target.expected or [], target.device or graph.device))


def _torch_graph_either_spelling(module, input_res, input_constructor) -> tuple:
    """(Graph, args, kwargs, batched) for a ``torch.nn.Module``: captured on ``input_res`` as the
    whole shape, or, when that capture fails, on ptflops' spelling ``(1, *input_res)`` (then
    ``batched`` is that shape, else None). A module that fails on both gets the first error."""
    try:
        return _torch_graph(module, input_res, input_constructor) + (None,)
    except (errors.ModelFileError, errors.ShapeError) as exc:
        if input_constructor is not None or not is_shape(input_res):
            raise
        first = exc
    batched = (1, *input_res)
    try:
        return _torch_graph(module, batched, None) + (batched,)
    except errors.FlopcountError:
        raise first from None


def _graph_spelling(graph: Graph, input_res) -> tuple | None:
    """None when ``graph`` (specialized to its traced shapes) takes ``input_res``; ``(1, *input_res)``
    when it takes that (ptflops' spelling); a ShapeError naming both when it takes neither."""
    if len(graph.inputs) != 1 or not is_shape(input_res):
        return None
    traced, batched = graph.inputs[0].shape, (1, *input_res)
    if tuple(input_res) == traced:
        return None
    if batched == traced:
        return batched
    raise errors.ShapeError(f"graph {graph.name} was traced on input shape {traced}; input_res {tuple(input_res)} "
                            f"is neither that nor that without the batch (trace again on the shape meant)")


def per_layer_listing(report: Report, model, ost=sys.stdout, flops_units=None, param_units=None,
                      precision: int = 2) -> None:
    """The model's repr, each module annotated as ptflops and flowflops print it:
    ``Conv2d(9.41 k, 0.037% Params, 118.01 MMac, 2.863% MACs, 3, 64, kernel_size=...)``."""
    total_macs = max(report.macs, 1)
    total_params = max(report.root.trainable_params, 1)

    def stat(path: str) -> str:
        row = report.row(path)
        return ", ".join([params_to_string(row.trainable_params, param_units, precision),
                          f"{100 * row.trainable_params / total_params:.3f}% Params",
                          macs_to_string(row.macs, flops_units, precision),
                          f"{100 * row.macs / total_macs:.3f}% MACs"])

    def text(module, path: str) -> str:
        extra = module.extra_repr()
        head = stat(path) + (", " + extra if extra else "")
        lines = []
        for name, child in module._modules.items():
            if child is None:
                continue
            child_path = f"{path}.{name}" if path else name
            body = text(child, child_path) if child_path in report else repr(child)
            lines.append(f"({name}): " + body.replace("\n", "\n  "))
        if not lines:
            return f"{type(module).__name__}({head})"
        return f"{type(module).__name__}(\n  " + "\n  ".join([head] + lines) + "\n)"

    print(text(model, ""), file=ost)


def get_model_complexity_info(model, input_res, print_per_layer_stat: bool = True, as_strings: bool = True,
                              input_constructor=None, ost=sys.stdout, verbose: bool = False,
                              ignore_modules=(), custom_modules_hooks=None, mode: str = "eager",
                              flops_units=None, param_units=None, output_precision: int = 2,
                              convention: str = "ptflops"):
    """``(macs, params)`` of ``model`` as ptflops/flowflops report them.

    ``input_res`` is the whole input shape, batch included (flowflops' meaning), or ptflops'
    spelling without the batch: when the whole shape does not fit the model's shape rules (or a
    ``torch.nn.Module`` fails to run on it), it runs on ``(1, *input_res)`` and says so on ``ost``. The model runs
    once on a tensor of ones of that shape (or on ``input_constructor(input_res)``; a dict is
    passed as keyword arguments). ``macs`` follows ``convention`` (``ptflops`` by default);
    ``params`` counts trainable parameters once. With ``as_strings`` both are strings such as
    ``"4.12 GMac"`` and ``"25.56 M"`` (``flops_units``/``param_units`` force a unit).
    ``ignore_modules`` lists module types counted as zero; ``custom_modules_hooks`` maps a type to
    a ptflops-style hook (both act on module rules: the eager view). ``mode="graph"`` parses
    the traced graph instead of hooking modules, pricing every op with the convention's op rules.
    A ``torch.nn.Module`` is captured (torch.export) and always counted in the graph view, so the
    ops it runs outside modules count too (ResNet's residual adds, which ptflops' hooks miss).

    >>> import flopcount, flopcount.runtime as rt
    >>> flopcount.get_model_complexity_info(rt.nn.Linear(3, 2), (3,), print_per_layer_stat=False)
    ('8 Mac', '8')
    """
    model = eager_form(model)
    if mode not in MODES:
        raise ValueError(f"get_model_complexity_info: mode must be one of {MODES}, got {mode!r}")
    batched = None   # the shape run instead of input_res, when read as ptflops' spelling
    if rt_torch.is_module(model):
        model, args, kwargs, batched = _torch_graph_either_spelling(model, input_res, input_constructor)
    elif not isinstance(model, (Module, Graph)):
        raise TypeError(f"get_model_complexity_info: model must be a Module (flopcount or torch) or a Graph, "
                        f"got {type(model).__name__}")
    else:
        if isinstance(model, Graph) and input_constructor is None:
            batched = _graph_spelling(model, input_res)
        args, kwargs = _inputs_from(model, batched or input_res, input_constructor)
    custom = {cls: _custom_rule(hook) for cls, hook in (custom_modules_hooks or {}).items()}
    conv = conventions.get(convention).with_modules(custom, ignore_modules)
    try:
        report = run_view(mode, model, args, kwargs, convention=conv)
    except errors.ShapeError:
        # ptflops' spelling leaves the batch out (it runs on (1, *input_res)); ours includes it.
        # The model's own shape rules decide: the spelling that fits is the one meant.
        if input_constructor is not None or batched is not None or not is_shape(input_res):
            raise
        batched = (1, *input_res)
        args, kwargs = _inputs_from(model, batched, None)
        report = run_view(mode, model, args, kwargs, convention=conv)
    if batched is not None:
        print(f"flopcount: input_res {tuple(input_res)} does not fit the model as a whole shape; read as "
              f"ptflops' spelling without the batch, it ran on {batched}", file=ost)
    if verbose:
        for item in report.unsupported:
            print(f"Warning: {item.kind} {item.name} is treated as a zero-op.", file=ost)
    macs, params = report.macs, report.root.trainable_params
    if print_per_layer_stat:
        if isinstance(model, Module) and mode == "eager":
            per_layer_listing(report, model, ost, flops_units, param_units, output_precision)
        else:
            print(report.tabulate("plain"), file=ost)
    if as_strings:
        return (macs_to_string(macs, flops_units, output_precision),
                params_to_string(params, param_units, output_precision))
    return macs, params


__all__ = ["get_model_complexity_info", "per_layer_listing"]
