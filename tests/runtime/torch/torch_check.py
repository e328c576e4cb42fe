"""Checks shared by the PyTorch frontend's tests: a torch module converted with
``rt.torch.to_graph`` against PyTorch itself (the independent engine).

    graph = check_outputs(torch.nn.Conv2d(3, 8, 3), torch.randn(2, 3, 9, 9))

``check_outputs`` converts the module on the example inputs, runs the Graph on the same values
and compares every output with torch's (values, shapes and dtypes).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flopcount.runtime as rt  # noqa: E402


def to_numpy(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value.numpy())


def leaves(value) -> list:
    """The tensors of a (nested) output, in order."""
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in leaves(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in leaves(v)]
    if hasattr(value, "to_tuple"):  # transformers' ModelOutput
        return leaves(value.to_tuple())
    return [value] if value is not None else []


def check_outputs(module, *inputs, rtol: float = 1e-5, atol: float = 1e-5, train: bool = False, **kwargs):
    """Convert ``module`` on ``inputs`` and compare the Graph's outputs with torch's; returns the Graph."""
    module.train(train)
    graph = rt.torch.to_graph(module, *inputs, train=train, **kwargs)
    with torch.no_grad():
        expected = leaves(module(*inputs, **kwargs))
    flat = [t for t in leaves((inputs, kwargs)) if isinstance(t, torch.Tensor)]
    got = leaves(graph(*[rt.tensor(t.detach().numpy()) for t in flat]))
    assert len(got) == len(expected), f"{len(got)} outputs, torch gives {len(expected)}"
    for ours, theirs in zip(got, expected):
        ours, theirs = to_numpy(ours), to_numpy(theirs)
        assert ours.shape == theirs.shape
        assert ours.dtype == theirs.dtype, f"dtype {ours.dtype}, torch gives {theirs.dtype}"
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)
    return graph


def op_names(graph) -> list:
    return [n.op_name for n in graph.nodes]


CAPTURES = ("export", "core_aten", "recorded")


def capture_as(how: str, module, inputs: tuple, kwargs: dict | None = None):
    """The Graph of ``module`` captured one of three ways: ``export`` (torch.export, functional
    ATen: what ``rt.torch.to_graph`` does), ``core_aten`` (the same, decomposed to the core ATen
    opset, as a ``.pt2`` saved after ``run_decompositions()`` holds it) or ``recorded`` (one
    eager run recorded at the ATen level: the fallback)."""
    from flopcount.runtime.torch.capture import from_program
    from flopcount.runtime.torch.importer import convert
    from flopcount.runtime.torch.record import record

    kwargs = kwargs or {}
    if how == "recorded":
        captured = record(module, tuple(inputs), kwargs)
    else:
        program = torch.export.export(module, tuple(inputs), kwargs, strict=False)
        program = program.run_decompositions({} if how == "export" else None)
        captured = from_program(program, type(module).__name__)
    graph, notes = convert(captured)
    graph.notes = notes
    return graph


def compare(graph, module, inputs: tuple, kwargs: dict | None = None, rtol: float = 1e-5, atol: float = 1e-6):
    """The Graph's outputs on ``inputs`` against ``module``'s (values, shapes, dtypes)."""
    kwargs = kwargs or {}
    with torch.no_grad():
        expected = leaves(module(*inputs, **kwargs))
    flat = [t for t in leaves((inputs, kwargs)) if isinstance(t, torch.Tensor)]
    got = leaves(rt.GraphModule(graph)(*[rt.tensor(t.detach().numpy()) for t in flat]))
    assert len(got) == len(expected), f"{len(got)} outputs, torch gives {len(expected)}"
    for ours, theirs in zip(got, expected):
        ours, theirs = to_numpy(ours), to_numpy(theirs)
        assert ours.shape == theirs.shape
        assert ours.dtype == theirs.dtype, f"dtype {ours.dtype}, torch gives {theirs.dtype}"
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)
