"""JSON nested deeper than Python's parser follows is malformed JSON (a ValueError that names the
size), never a RecursionError escaping as a crash: safetensors headers, graph headers, Hugging
Face configs and shard indexes are read through parse_json."""

from __future__ import annotations

import json

import pytest

from flopcount.models import _hf_folder
from flopcount.runtime.errors import ModelFileError
from flopcount.runtime.io.json_text import NestedTooDeeply, parse_json

DEEP = 100000


def test_shallow_json_reads_as_json_loads():
    text = json.dumps({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, "__metadata__": {}})
    assert parse_json(text) == json.loads(text)
    assert parse_json(text.encode()) == json.loads(text)


@pytest.mark.parametrize("text", ["[" * DEEP + "]" * DEEP, '{"a":' * DEEP + "1" + "}" * DEEP])
def test_deep_nesting_is_a_value_error_naming_the_size(text):
    with pytest.raises(NestedTooDeeply, match=f"nested too deeply to read \\({len(text)} characters\\)") as info:
        parse_json(text)
    assert isinstance(info.value, ValueError)


def test_a_shard_index_nested_too_deeply_is_refused_naming_it(tmp_path):
    (tmp_path / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    index = tmp_path / _hf_folder.INDEX_FILE
    index.write_text('{"weight_map":' + "[" * DEEP + "]" * DEEP + "}")
    with pytest.raises(ModelFileError, match="not a readable shard index.*nested too deeply") as info:
        _hf_folder.weight_files(str(tmp_path))
    assert str(index) in str(info.value)
