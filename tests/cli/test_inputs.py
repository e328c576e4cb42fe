"""--input-shape, --dtype and --factory-arg as text (what they become is tests/test_inputs.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flopcount.cli.inputs import parse_dtype, parse_factory_arg, parse_shape
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
