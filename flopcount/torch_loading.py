"""PyTorch's ways in, as :mod:`flopcount.loading` Targets: a ``torch.nn.Module``, a ``.pt2``
archive, and the refusal of pickled checkpoints.

A module is a Target of kind ``torch`` until its inputs are known; :func:`specialize` then
captures it for them (``rt.torch.to_graph``) and the Target holds the Graph, fixed to those
shapes, like a model file. Its parameters share the torch tensors' memory, or are meta when
the module is on torch's meta device (counted from shapes only).

    target = specialize(load_module(torchvision.models.resnet18()), given=[(None, (1, 3, 224, 224))])
    target.model        # Graph, scopes layer1.0.conv1 ...
"""

from __future__ import annotations

import os

from .inputs import resolve_inputs
from .target import PT2, TORCH, Target, graph_inputs
from .runtime import errors
from .runtime.graph import Graph
from .runtime.io import sniff


# --- modules ------------------------------------------------------------------------------------

def load_module(module, label: str = "", path: str = "") -> Target:
    """A Target for a ``torch.nn.Module`` (captured later, by :func:`specialize`)."""
    return Target(module, label, TORCH, path=path)


def specialize(target: Target, specs: list | None = None, *, given: list = (), examples: tuple | None = None,
               train: bool = False) -> Target:
    """``target`` with a PyTorch module captured as a Graph for its inputs: ``examples``
    ((args, kwargs) of tensors), or ``specs`` (InputSpecs), or ``given`` shapes. Other Targets,
    and modules already captured, come back as they are. ``train`` captures training mode."""
    if target.kind != TORCH or isinstance(target.model, Graph):
        return target
    from .runtime import torch as rt_torch

    module = target.model
    name = target.label or type(module).__name__
    if examples is not None and (examples[0] or examples[1]):
        args, kwargs = examples
    else:
        if specs is None:
            specs = resolve_inputs(target.expected, list(given), model=name)
        args, kwargs = example_tensors(module, specs)
    try:
        graph = rt_torch.to_graph(module, *args, train=train, **kwargs)
    except errors.FlopcountError:
        raise
    except Exception as exc:  # the user's model failed to run or to capture: one line
        text = " ".join(str(exc).split())[:300]
        raise errors.ModelFileError(f"{name}: capturing the PyTorch model failed ({type(exc).__name__}: {text})") \
            from exc
    graph.name = name
    out = Target(graph, target.label, TORCH, graph_inputs(graph), fixed=True,
                 notes=list(target.notes) + list(graph.notes), path=target.path,
                 torch_call=(module, tuple(args), dict(kwargs)))
    if any(graph.tensors[n].data is None for n in graph.parameters):
        out.device = "meta"   # a model on torch's meta device: counted from shapes
    return out


def example_tensors(module, specs: list) -> tuple:
    """(args, kwargs) of torch tensors for ``specs``, on the module's device: floats standard
    normal, integers below ``high`` (token ids) or zero; unnamed inputs by position."""
    import torch

    device = next((p.device for p in module.parameters()), None) or \
        next((b.device for b in module.buffers()), torch.device("cpu"))
    generator = torch.Generator().manual_seed(0)
    args, kwargs = [], {}
    for spec in specs:
        dtype = getattr(torch, spec.dtype)
        if device.type == "meta":
            t = torch.empty(spec.shape, dtype=dtype, device="meta")
        elif dtype.is_floating_point:
            t = torch.randn(spec.shape, generator=generator, dtype=dtype).to(device)
        elif spec.high is not None:
            t = torch.randint(0, spec.high, spec.shape, generator=generator, dtype=dtype).to(device)
        else:
            t = torch.zeros(spec.shape, dtype=dtype, device=device)
        if spec.name is None:
            args.append(t)
        else:
            kwargs[spec.name] = t
    return tuple(args), kwargs


# --- files ---------------------------------------------------------------------------------------

def refuse_pickle(path: str, kind: str) -> None:
    """One line for a pickled checkpoint: flopcount never unpickles (it can run code)."""
    what = "a PyTorch checkpoint written by torch.save (a pickle)" if kind == sniff.TORCH_PICKLE else "a pickle"
    raise errors.ModelFileError(
        f"{path}: {what}; flopcount never unpickles a file (unpickling can run code). Load it in your own "
        f"Python and pass the module (flopcount.profile(model, example_input)), or save it as a .pt2 "
        f"(torch.export.save), ONNX or safetensors file")


def load_pt2(path: str, device, given: list, batch: int | None = None) -> Target:
    """A ``torch.export.save`` archive, read without unpickling (``rt.torch.load``)."""
    from .runtime import torch as rt_torch

    shapes = [dims for _, dims in given] if given else None
    if batch is not None:
        shapes = [(batch,) + tuple(s[1:]) for s in shapes] if shapes else batch
    graph = rt_torch.load(path, input_shapes=shapes, device="meta" if str(device) == "meta" else None)
    on_meta = any(graph.tensors[n].data is None for n in graph.parameters)
    if not on_meta and str(device) not in ("cpu", "meta"):
        graph = graph.to(device)
    target = Target(graph, os.path.basename(path), PT2, graph_inputs(graph), fixed=True, notes=list(graph.notes),
                    path=path)
    if on_meta:
        target.device = "meta"
    return target


__all__ = ["load_module", "specialize", "example_tensors", "refuse_pickle",
           "load_pt2"]
