"""Every zoo model: the traced graph computes what eager mode computes, before and after the
optimization passes (constant folding, conv + batch-norm folding, elementwise fusion, dead code,
memory plan).

Inputs are smaller than the zoo's defaults where the architecture allows it (adaptive pooling,
padded windows, shorter token sequences): the computation checked is the same, the test is
faster.
"""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount import models
from flopcount.runtime.graph.passes import optimize

META_ONLY = {n for n in models.names() if (models.info(n).params or 0) > 10 ** 9}  # billions of parameters: shapes only
IMAGE_SIZE = {"vit_b_16": 224, "inception_v3": 96}  # fixed position embeddings; a 75-pixel minimum
SMALL_IMAGE, SHORT_TEXT = 64, 16


def _input(name):
    x = models.example_input(name)
    if isinstance(x, tuple) or x.dtype is not rt.float32:
        return (x[:, :SHORT_TEXT],) if not isinstance(x, tuple) else tuple(t[:, :SHORT_TEXT] for t in x)
    size = IMAGE_SIZE.get(name, SMALL_IMAGE)
    return (rt.tensor(np.random.default_rng(0).standard_normal((1, 3, size, size)).astype(np.float32)),)


def _flat(out) -> list:
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _assert_same(got, expected, what):
    for g, e in zip(_flat(got), _flat(expected), strict=True):
        scale = max(1.0, float(np.abs(e.numpy()).max()))
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-5 * scale, err_msg=what)


@pytest.mark.parametrize("name", [n for n in models.names() if n not in META_ONLY])
def test_graph_equals_eager(name):
    model = models.get(name).eval()
    inputs = _input(name)
    with rt.no_grad():
        expected = model(*inputs)
        if not all(getattr(m, "replayable", True) for m in model.modules()):
            # routing by value (mixture of experts): graph mode runs it eagerly
            _assert_same(rt.compile(model)(*inputs), expected, f"{name}: lazy graph")
            return
        graph = rt.trace(model, *inputs)
        _assert_same(rt.GraphModule(graph)(*inputs), expected, f"{name}: traced graph")
        _assert_same(rt.GraphModule(optimize(graph, fold_bn=True))(*inputs), expected, f"{name}: optimized graph")


@pytest.mark.parametrize("name", sorted(META_ONLY))
def test_meta_only_presets_trace_to_the_eager_shapes(name):
    with rt.meta():
        model = models.get(name)
    x = models.example_input(name, device="meta")[:, :SHORT_TEXT]
    graph = rt.trace(model, x)
    for g, e in zip(_flat(rt.GraphModule(graph)(x)), _flat(model(x)), strict=True):
        assert (g.shape, g.dtype) == (e.shape, e.dtype)
