"""--input-shape, --dtype, --batch and --factory-arg: parsing, merging with what a model takes,
and the tensors they make."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flopcount.cli.inputs import (InputSpec, make_tensors, parse_dtype, parse_factory_arg, parse_shape,
                                  resolve_inputs)
from flopcount.runtime.errors import FlopcountError, ShapeError

dims = st.lists(st.integers(1, 4096), min_size=1, max_size=6).map(tuple)


@settings(max_examples=60, deadline=None)
@given(dims, st.sampled_from([",", "x", "X", ", ", " x ", "*"]), st.booleans(), st.booleans())
def test_parse_shape_reads_every_spelling(shape, sep, parens, named):
    text = sep.join(str(d) for d in shape)
    if parens:
        text = f"({text})"
    if named:
        text = "input_ids=" + text
    assert parse_shape(text) == ("input_ids" if named else None, shape)


@pytest.mark.parametrize("text", ["", "1,,3", "1x3x", "a,b", "1.5,3", "1,-3", "0x3", "=1x3", "x y=1x3", "1;3"])
def test_parse_shape_rejects_malformed_text_naming_it(text):
    with pytest.raises(ShapeError, match="--input-shape"):
        parse_shape(text)


def test_parse_dtype_and_factory_args():
    assert parse_dtype("int64") == (None, "int64")
    assert parse_dtype("input_ids = int32") == ("input_ids", "int32")
    with pytest.raises(FlopcountError, match="--dtype 'int65'"):
        parse_dtype("int65")
    assert parse_factory_arg("width=64") == ("width", 64)
    assert parse_factory_arg("kernel=(3, 3)") == ("kernel", (3, 3))
    assert parse_factory_arg("scale=0.5") == ("scale", 0.5)
    assert parse_factory_arg("act=relu") == ("act", "relu")          # not a literal: a string
    assert parse_factory_arg("name='relu'") == ("name", "relu")
    assert parse_factory_arg("flag=True") == ("flag", True)
    for bad in ("width", "=3", "1x=3"):
        with pytest.raises(FlopcountError, match="--factory-arg"):
            parse_factory_arg(bad)


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
