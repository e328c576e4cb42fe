"""profile(dtype=...): the model's weights and activations in a floating dtype, token ids kept."""

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount.runtime import FlopcountError


def test_llama2_7b_weights_in_bfloat16_are_13_48_gb():
    # 6,738,415,616 parameters (Meta's model card) at two bytes each
    report = flopcount.profile("llama2_7b", dtype="bf16", device="meta")
    assert report.params == 6_738_415_616
    assert report.memory.parameters == {"bfloat16": 13_476_831_232}
    assert round(report.memory.parameter_bytes / 1e9, 2) == 13.48


def test_token_ids_stay_int64_while_activations_follow_the_dtype():
    report = flopcount.profile("gpt2", dtype="float16", device="meta", input_shape=(1, 16))
    embedding = [r for r in report.by_op("forward") if r.op == "embedding"]
    assert embedding and all(sorted(r.input_dtypes) == ["float16", "int64"] for r in embedding)
    linears = [r for r in report.by_op("forward") if r.op == "linear"]
    assert linears and all(r.output_dtypes == ("float16",) for r in linears)
    # bytes follow: the first block's qkv projection reads a 768 x 2304 half-precision weight
    assert linears[0].bytes_read == 2 * (16 * 768 + 768 * 2304 + 2304)


def test_a_module_passed_in_is_converted_on_a_copy():
    net = rt.nn.Sequential(rt.nn.Linear(8, 4), rt.nn.ReLU())
    x = rt.randn(2, 8)
    report = flopcount.profile(net, x, dtype=rt.bfloat16)
    assert report.memory.parameters == {"bfloat16": 2 * (8 * 4 + 4)}
    assert net[0].weight.dtype is rt.float32 and x.dtype is rt.float32  # the caller's are untouched
    assert report.by_op("forward")[0].input_dtypes[0] == "bfloat16"     # the input given was cast


def test_an_integer_or_per_input_dtype_is_the_inputs_dtype():
    # a model that cannot tell its input is token ids: its default input is float32
    class Tagger(rt.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = rt.nn.Embedding(10, 4)

        def forward(self, ids):
            return self.embed(ids)

    for dtype, shape in (("int64", (2, 5)), ({"ids": "int64"}, {"ids": (2, 5)})):
        report = flopcount.profile(Tagger(), input_shape=shape, dtype=dtype)
        assert report.by_op("forward")[0].input_dtypes == ("float32", "int64")
    assert report.memory.parameters == {"float32": 4 * 10 * 4}  # the weights are untouched
    with pytest.raises(FlopcountError, match="the tensors given keep theirs"):
        flopcount.profile(Tagger(), rt.zeros(2, 5, dtype=rt.int64), dtype="int32")


def test_bad_dtypes_and_graphs_are_one_line_errors(tmp_path):
    with pytest.raises(FlopcountError, match="need a floating dtype"):
        flopcount.loading.in_dtype(flopcount.loading.load("resnet18", "meta"), "int8")
    with pytest.raises(FlopcountError, match="unknown dtype 'bf17'"):
        flopcount.profile("resnet18", dtype="bf17", device="meta")
    path = tmp_path / "lin.safetensors"
    rt.save(rt.nn.Linear(4, 2), path, example_inputs=(rt.randn(1, 4),))
    with pytest.raises(FlopcountError, match="keeps the dtypes it was made with"):
        flopcount.profile(str(path), dtype="bf16")
