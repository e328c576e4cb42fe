"""Inputs shared by profile() and the command line: merging given shapes with what a model
takes, the tensors they make, and named inputs bound to forward's parameters or graph inputs."""

from __future__ import annotations

import pytest

import flopcount.runtime as rt
from flopcount.inputs import InputSpec, bind_inputs, given_shapes, inputs_for, make_tensors, resolve_inputs
from flopcount.runtime.errors import ShapeError


ZOO_IMAGE = [InputSpec("x", (1, 3, 224, 224))]
TWO = [InputSpec("input_ids", (1, 128), "int64", 30522), InputSpec("mask", (1, 128), "int64", 2)]


def test_defaults_batch_and_override():
    assert resolve_inputs(ZOO_IMAGE, []) == ZOO_IMAGE
    assert resolve_inputs(ZOO_IMAGE, [], batch=8)[0].shape == (8, 3, 224, 224)
    assert resolve_inputs(ZOO_IMAGE, [(None, (2, 3, 96, 96))])[0].shape == (2, 3, 96, 96)
    # --batch sets the first dimension of given shapes too
    assert resolve_inputs(ZOO_IMAGE, [("x", (2, 3, 96, 96))], batch=4)[0].shape == (4, 3, 96, 96)


def test_named_inputs_keep_their_dtype_and_bound():
    out = resolve_inputs(TWO, [("mask", (1, 64))])
    assert out == [TWO[0], InputSpec("mask", (1, 64), "int64", 2)]
    out = resolve_inputs(TWO, [(None, (2, 16)), (None, (2, 16))], dtypes=[("mask", "int32")])
    assert [(s.shape, s.dtype, s.high) for s in out] == [((2, 16), "int64", 30522), ((2, 16), "int32", 2)]
    assert [s.dtype for s in resolve_inputs(TWO, [], dtypes=[(None, "float32")])] == ["float32", "float32"]
    assert all(s.high is None for s in resolve_inputs(TWO, [], dtypes=[(None, "float32")]))


def test_unknown_model_inputs_come_from_the_user():
    out = resolve_inputs(None, [(None, (3, 4)), ("extra", (3, 3))], dtypes=[("extra", "int64")])
    assert out == [InputSpec(None, (3, 4)), InputSpec("extra", (3, 3), "int64")]


@pytest.mark.parametrize("expected, given, kwargs, message", [
    (None, [], {}, "has no default input"),
    (ZOO_IMAGE, [(None, (1, 3, 7))], {}, "expects 4 (x=1x3x224x224)"),
    (ZOO_IMAGE, [("image", (1, 3, 7, 7))], {}, "no input 'image'; its inputs are x=1x3x224x224"),
    (ZOO_IMAGE, [(None, (1, 3, 7, 7)), (None, (1, 3, 7, 7))], {}, "2 input shapes given, but the model takes 1"),
    (TWO, [], {"dtypes": [("ids", "int32")]}, "no input 'ids'"),
])
def test_mismatches_name_what_the_model_takes(expected, given, kwargs, message):
    with pytest.raises(ShapeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_inputs(expected, given, **kwargs)


def test_make_tensors_values_and_placement():
    specs = [InputSpec("x", (2, 3)), InputSpec("ids", (4, 5), "int64", 7), InputSpec("pos", (4,), "int64")]
    args, kwargs = make_tensors(specs, "cpu")
    assert kwargs == {}
    x, ids, pos = args
    assert (x.shape, x.dtype.name, ids.dtype.name) == ((2, 3), "float32", "int64")
    values = ids.numpy()
    assert values.min() >= 0 and values.max() < 7
    assert (pos.numpy() == 0).all()                                  # no bound known: zeros are valid ids
    args, kwargs = make_tensors(specs, "meta", keyword=True)
    assert args == () and sorted(kwargs) == ["ids", "pos", "x"]
    assert all(t.device.type == "meta" for t in kwargs.values())


@pytest.mark.parametrize("value, expected", [
    ((1, 3, 8, 8), [(None, (1, 3, 8, 8))]),
    ([2, 4], [(None, (2, 4))]),
    ([(2, 4), [2, 3]], [(None, (2, 4)), (None, (2, 3))]),
    ({"ids": (1, 16), "mask": [1, 16]}, [("ids", (1, 16)), ("mask", (1, 16))]),
    (None, []),
])
def test_given_shapes_spellings(value, expected):
    assert given_shapes(value) == expected


@pytest.mark.parametrize("value, fragment", [
    ((1, -3, 8), "got -3"), ((1, 0), "got 0"), ((1, 2.5), "got 2.5"), ((1, True), "got True"),
    ({"x": (1, "a")}, "input_shape['x']"), ([(2, 4), ()], "non-empty"), ("1x3", "expected a shape"),
])
def test_given_shapes_refuse_bad_dims_naming_the_value(value, fragment):
    with pytest.raises(ShapeError, match="input_shape") as info:
        given_shapes(value)
    assert fragment in str(info.value)


def test_api_spelling_in_errors():
    with pytest.raises(ShapeError, match=r"MLP has no default input; give one with input_shape, e.g. "
                                         r"input_shape=\(1, 3, 224, 224\)"):
        resolve_inputs(None, [], model="MLP")
    with pytest.raises(ShapeError, match=r"input_shape=\{'image': \(1, 3, 8, 8\)\}: the model has no input 'image'"):
        resolve_inputs(ZOO_IMAGE, [("image", (1, 3, 8, 8))])


def test_bind_inputs_orders_named_inputs_as_forward_declares_them():
    class Two(rt.nn.Module):
        def forward(self, x, y=None, *, scale=1.0):
            return x

    a, b = rt.ones(1), rt.zeros(1)
    args, kwargs = bind_inputs(Two(), (), {"y": b, "x": a})
    assert args == (a, b) and kwargs == {}
    args, kwargs = bind_inputs(Two(), (a,), {"scale": 2.0})
    assert args == (a,) and kwargs == {"scale": 2.0}
    with pytest.raises(ShapeError, match=r"Two.forward\(x, y=None, \*, scale=1.0\): it has no parameter 'z'"):
        bind_inputs(Two(), (a,), {"z": b})
    with pytest.raises(ShapeError, match="multiple values for argument 'x'"):
        bind_inputs(Two(), (a,), {"x": b})


def test_inputs_for_a_graph_follow_its_input_tree():
    graph = rt.trace(lambda x, y: x + y, rt.ones(2), rt.ones(2))
    args, kwargs = inputs_for(graph, [InputSpec("x", (2,)), InputSpec("y", (2,))], "cpu")
    assert [tuple(a.shape) for a in args] == [(2,), (2,)] and kwargs == {}
    with pytest.raises(ShapeError, match="takes 2 input"):
        inputs_for(graph, [InputSpec("x", (2,))], "cpu")
