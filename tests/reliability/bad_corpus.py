"""The corpus of bad inputs: files (and model specs) that flopcount must refuse with one clear
error, each with the error class and the message fragments a user needs to see.

The files are made here, at test time, into ``tests/data/bad/`` (ignored by git) or any other
directory; ``python tests/reliability/bad_corpus.py [DIR]`` writes them for a look by hand.

    cases = build(directory)      # writes the files, returns [Case]
    for case in cases: ...        # case.model, case.error, case.fragments, case.api, case.cli

A fragment may contain ``{path}``, the model file's path.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass, field

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.join(os.path.dirname(HERE), "data", "bad")
CNN_FIXTURE = os.path.join(os.path.dirname(HERE), "data", "onnx", "cnn_torchscript_op13.onnx")
GIB = 1 << 30


@dataclass
class Case:
    """One bad input: ``model`` (a path or ``file.py:factory``) refused with ``error`` whose
    message holds every fragment; ``api`` are extra ``profile()`` arguments, ``cli`` extra
    command-line arguments after MODEL."""

    name: str
    model: str
    error: str                       # class name in flopcount: ModelFileError, ShapeError...
    fragments: tuple
    api: dict = field(default_factory=dict)
    cli: tuple = ()
    where: tuple = ("api", "cli")    # text only the command line reads: ("cli",)

    def expected(self) -> list:
        return [f.replace("{path}", self.model) for f in self.fragments]


# --- small valid models the bad ones are made from ---------------------------------------------

def _onnx():
    import onnx

    return onnx


def onnx_model(nodes, inputs, outputs, initializers=(), opset: int = 17):
    """A ModelProto from helper-made parts (IR version 8, which every opset here allows)."""
    from onnx import helper

    graph = helper.make_graph(nodes, "bad", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _value(name: str, dims, elem=None):
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, elem or TensorProto.FLOAT, None if dims is None else list(dims))


def _array(name: str, value):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(value), name)


def mlp_onnx():
    """x [1, 4] @ W (4, 3) -> Relu -> y [1, 3]: 12 MACs; the base of most ONNX cases."""
    from onnx import helper

    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="fc"),
             helper.make_node("Relu", ["h"], ["y"], name="act")]
    return onnx_model(nodes, [_value("x", (1, 4))], [_value("y", (1, 3))],
                      [_array("W", np.ones((4, 3), np.float32))])


def _one_node(node, x_dims=(1, 4), y_dims=(1, 4), initializers=(), opset: int = 17, extra_outputs=()):
    return onnx_model([node], [_value("x", x_dims)], [_value("y", y_dims)] + list(extra_outputs),
                      initializers, opset)


def native_bytes(directory: str, conv: bool = False) -> bytes:
    """A native model file of a small MLP traced on a (3, 4) input (with ``conv``: conv, batch
    norm and ReLU on a (1, 3, 8, 8) input)."""
    import flopcount.runtime as rt

    nn = rt.nn
    if conv:
        net, x = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()), rt.randn(1, 3, 8, 8)
    else:
        net, x = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), rt.randn(3, 4)
    path = os.path.join(directory, f".valid.{os.getpid()}.safetensors")
    rt.save(net.eval(), path, example_inputs=(x,))
    with open(path, "rb") as f:
        data = f.read()
    os.remove(path)
    return data


def native_parts(data: bytes) -> tuple:
    """(header dict, data bytes) of a safetensors file's bytes."""
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + n]), data[8 + n:]


def native_join(header: dict, body: bytes) -> bytes:
    raw = json.dumps(header, separators=(",", ":")).encode()
    return len(raw).to_bytes(8, "little") + raw + body


def with_graph(data: bytes, edit) -> bytes:
    """A native file whose graph JSON ``edit(doc)`` changed, with a matching checksum (a
    crafted file, not a damaged one)."""
    header, body = native_parts(data)
    meta = header["__metadata__"]
    doc = json.loads(meta["graph"])
    edit(doc)
    text = json.dumps(doc)
    meta.update(graph=text, graph_sha256=hashlib.sha256(text.encode()).hexdigest())
    return native_join(header, body)


# --- the corpus --------------------------------------------------------------------------------

def _write(directory: str, name: str, data) -> str:
    # atomically: test processes running side by side may rewrite the corpus while others read it
    from flopcount.io_utils import atomic_write

    path = os.path.join(directory, name)
    atomic_write(path, data if isinstance(data, (bytes, str)) else data.SerializeToString())
    return path


def onnx_cases(directory: str) -> list:
    onnx = _onnx()
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    cases = [
        Case("empty onnx", _write(directory, "empty.onnx", b""), "ModelFileError",
             ("{path}", "not an ONNX model")),
        Case("random bytes onnx", _write(directory, "random.onnx", rng.bytes(4096)), "ModelFileError",
             ("{path}", "not")),
    ]
    with open(CNN_FIXTURE, "rb") as f:
        cnn = f.read()
    for offset in (1, 16, len(cnn) // 4, len(cnn) // 2, len(cnn) * 9 // 10, len(cnn) - 1):
        path = _write(directory, f"truncated_{offset}.onnx", cnn[:offset])
        cases.append(Case(f"onnx truncated at {offset}", path, "ModelFileError", ("{path}", "not"),
                          api={"input_shape": (1, 3, 32, 32)}, cli=("-i", "1x3x32x32")))

    no_weight = onnx_model([helper.make_node("MatMul", ["x", "W"], ["y"], name="fc")], [_value("x", (1, 4))],
                           [_value("y", (1, 3))])
    cases.append(Case("missing initializer", _write(directory, "missing_initializer.onnx", no_weight),
                      "ModelFileError", ("{path}", "not a valid ONNX model", "input 'W'")))
    cycle = onnx_model([helper.make_node("Add", ["x", "b"], ["a"], name="add"),
                        helper.make_node("Relu", ["a"], ["b"], name="loop"),
                        helper.make_node("Relu", ["a"], ["y"], name="out")], [_value("x", (1, 4))],
                       [_value("y", (1, 4))])
    cases.append(Case("cycle", _write(directory, "cycle.onnx", cycle), "ModelFileError",
                      ("{path}", "topologically sorted", "input 'b'")))
    dangling_in = onnx_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")], [_value("x", (1, 4))],
                             [_value("y", (1, 4))])
    cases.append(Case("dangling input", _write(directory, "dangling_input.onnx", dangling_in), "ModelFileError",
                      ("{path}", "input 'ghost'")))
    dangling_out = onnx_model([helper.make_node("Relu", ["x"], ["h"], name="act")], [_value("x", (1, 4))],
                              [_value("y", (1, 4))])
    cases.append(Case("dangling output", _write(directory, "dangling_output.onnx", dangling_out), "ModelFileError",
                      ("{path}", "output 'y'")))
    unknown = onnx_model([helper.make_node("FooBar", ["x"], ["h"], name="foo1"),
                          helper.make_node("Relu", ["h"], ["y"], name="act")], [_value("x", (1, 4))],
                         [_value("y", (1, 4))])
    cases.append(Case("unknown op", _write(directory, "unknown_op.onnx", unknown), "UnsupportedOpError",
                      ("{path}", "FooBar", "'foo1'")))

    # out-of-range attributes: each refused naming the node and the value
    image = (1, 2, 8, 8)
    weight = [_array("Wc", np.ones((3, 2, 3, 3), np.float32))]
    attrs = [
        ("softmax axis", helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=5), {}, "ShapeError",
         ("'sm'", "axis 5")),
        ("concat axis", helper.make_node("Concat", ["x", "x"], ["y"], name="cat", axis=7), {"y_dims": (1, 8)},
         "ShapeError", ("'cat'", "axis 7")),
        ("flatten axis", helper.make_node("Flatten", ["x"], ["y"], name="flat", axis=9), {}, "ShapeError",
         ("'flat'", "axis 9")),
        ("transpose perm", helper.make_node("Transpose", ["x"], ["y"], name="tr", perm=[0, 0]), {}, "ShapeError",
         ("'tr'", "(0, 0)")),
        ("conv stride 0", helper.make_node("Conv", ["x", "Wc"], ["y"], name="conv", strides=[0, 0]),
         {"x_dims": image, "y_dims": (1, 3, 6, 6), "initializers": weight}, "ShapeError", ("'conv'", "stride (0, 0)")),
        ("conv dilation 0", helper.make_node("Conv", ["x", "Wc"], ["y"], name="conv", dilations=[0, 0]),
         {"x_dims": image, "y_dims": (1, 3, 6, 6), "initializers": weight}, "ShapeError",
         ("'conv'", "dilation (0, 0)")),
        ("conv groups", helper.make_node("Conv", ["x", "Wc"], ["y"], name="conv", group=7),
         {"x_dims": image, "y_dims": (1, 3, 6, 6), "initializers": weight}, "ShapeError", ("'conv'", "groups=7")),
        ("pool kernel 0", helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[0, 0]),
         {"x_dims": image, "y_dims": (1, 2, 8, 8)}, "ShapeError", ("'pool'", "kernel_size (0, 0)")),
        ("pool kernel too big", helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[20, 20]),
         {"x_dims": image, "y_dims": (1, 2, 1, 1)}, "ShapeError", ("'pool'", "kernel_size (20, 20)")),
        ("slice step 0", helper.make_node("Slice", ["x", "s", "e", "a", "z"], ["y"], name="cut"),
         {"initializers": [_array("s", [0]), _array("e", [4]), _array("a", [1]), _array("z", [0])]},
         "ModelFileError", ("'cut'", "step cannot be zero")),
        ("range step 0", helper.make_node("Range", ["s", "s", "z"], ["y"], name="r"),
         {"initializers": [_array("s", np.int64(0)), _array("z", np.int64(0))]}, "ShapeError",
         ("'r'", "'delta' is 0")),
        ("constant of negative shape", helper.make_node("ConstantOfShape", ["shape"], ["y"], name="c"),
         {"initializers": [_array("shape", np.array([-3, 4], np.int64))]}, "ShapeError", ("'c'", "(-3, 4)")),
        ("cast to an unknown type", helper.make_node("Cast", ["x"], ["y"], name="cast", to=99), {},
         "UnsupportedOpError", ("'cast'", "type 99")),
        ("unsqueeze repeated axes", helper.make_node("Unsqueeze", ["x", "axes"], ["y"], name="unsq"),
         {"y_dims": (1, 1, 1, 4), "initializers": [_array("axes", np.array([1, 1], np.int64))]}, "ShapeError",
         ("'unsq'", "(1, 1) name a dim twice")),
    ]
    for name, node, parts, error, fragments in attrs:
        model = _one_node(node, **parts)
        path = _write(directory, name.replace(" ", "_") + ".onnx", model)
        cases.append(Case(name, path, error, ("{path}",) + fragments))

    for opset, fragments in ((99, ("opset 99", "defines opsets up to")), (0, ("domain_version of 0",))):
        model = _one_node(helper.make_node("Relu", ["x"], ["y"], name="act"), opset=opset)
        cases.append(Case(f"opset {opset}", _write(directory, f"opset_{opset}.onnx", model), "ModelFileError",
                          ("{path}",) + fragments))
    gelu = _one_node(helper.make_node("Gelu", ["x"], ["y"], name="gelu"), opset=13)
    cases.append(Case("op newer than the opset", _write(directory, "gelu_at_opset_13.onnx", gelu), "ModelFileError",
                      ("{path}", "Gelu", "domain_version of 13")))

    # weights in a side file that is missing (never written, so no other process can see it)
    external = mlp_onnx()
    weight = external.graph.initializer[0]
    onnx.external_data_helper.set_external_data(weight, location="external.weights", offset=0,
                                                length=len(weight.raw_data))
    weight.data_location = TensorProto.EXTERNAL
    weight.ClearField("raw_data")
    cases.append(Case("external data missing", _write(directory, "external.onnx", external), "ModelFileError",
                      ("{path}", "external.weights")))

    # 1 GiB claimed in a file of a few hundred bytes, and built at import from a few bytes
    big = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[16384, 16384], raw_data=b"\0" * 64)
    model = onnx_model([helper.make_node("MatMul", ["x", "W"], ["y"], name="fc")], [_value("x", (1, 16384))],
                       [_value("y", (1, 16384))], [big])
    cases.append(Case("onnx claims 1 GiB", _write(directory, "claims_1gib.onnx", model), "ModelFileError",
                      ("{path}", "name: W", "1073741824 bytes")))
    for name, node, inits in [
            ("constant of 1 GiB", helper.make_node("ConstantOfShape", ["shape"], ["c"], name="c"),
             [_array("shape", np.array([16384, 16384], np.int64))]),
            ("range of 80 GB", helper.make_node("Range", ["s", "l", "d"], ["c"], name="c"),
             [_array("s", np.int64(0)), _array("l", np.int64(10 ** 10)), _array("d", np.int64(1))])]:
        model = onnx_model([node, helper.make_node("Cast", ["c"], ["y"], name="cast", to=TensorProto.FLOAT)],
                           [_value("x", (1, 4))], [_value("y", None)], inits)
        cases.append(Case(name, _write(directory, name.replace(" ", "_") + ".onnx", model), "ShapeError",
                          ("{path}", "'c'", "GiB", "256 MiB")))

    for name, text in DEEP_LITERALS.items():
        deep = mlp_onnx()
        entry = deep.graph.node[0].metadata_props.add()
        entry.key, entry.value = "pkg.torch.onnx.name_scopes", text
        cases.append(Case(f"onnx name scope of {name}", _write(directory, f"scope_{name.replace(' ', '_')}.onnx", deep),
                          "ModelFileError", ("{path}", "node 'fc'", "name_scopes", "nested too deeply")))
    rank = (1,) * 65
    rank65 = onnx_model([helper.make_node("Relu", ["x"], ["y"], name="act")], [_value("x", rank)], [_value("y", rank)])
    cases.append(Case("onnx input with 65 dimensions", _write(directory, "rank_65.onnx", rank65), "ShapeError",
                      ("input x has 65 dimensions", "at most 64")))

    negative = onnx_model([helper.make_node("Relu", ["x"], ["y"], name="act")], [_value("x", (1, -4))],
                          [_value("y", (1, 4))])
    cases.append(Case("onnx input with a negative dim", _write(directory, "negative_dim.onnx", negative),
                      "ModelFileError", ("{path}", "input 'x'", "[1, -4]")))
    mlp = _write(directory, "mlp.onnx", mlp_onnx())
    cases.append(Case("two shapes for a one-input onnx file", mlp, "ShapeError", ("2 shapes", "1 input"),
                      api={"input_shape": [(1, 4), (1, 4)]}, cli=("-i", "1x4", "-i", "1x4")))
    cases.append(Case("onnx shape that contradicts the file", mlp, "ShapeError", ("'x'", "[1, 4]", "(2, 4)"),
                      api={"input_shape": (2, 4)}, cli=("-i", "2x4")))
    return cases


def native_cases(directory: str) -> list:
    data = native_bytes(directory)
    header, body = native_parts(data)
    rng = np.random.default_rng(1)
    cases = [
        Case("empty native file", _write(directory, "empty.safetensors", b""), "ModelFileError",
             ("{path}", "0 bytes is too short")),
        Case("random bytes native file", _write(directory, "random.safetensors", rng.bytes(2048)), "ModelFileError",
             ("{path}", "not a safetensors file")),
        Case("truncated native file", _write(directory, "truncated.safetensors", data[:len(data) - 40]),
             "ModelFileError", ("{path}", "truncated")),
        Case("native header length corrupted", _write(directory, "bad_length.safetensors",
                                                      (10 ** 12).to_bytes(8, "little") + data[8:]),
             "ModelFileError", ("{path}", "header declares 1000000000000 bytes")),
    ]
    raw = data[8:8 + int.from_bytes(data[:8], "little")]
    broken = data[:8] + raw.replace(b'"format"', b'"f\x00rmat"', 1) + body
    cases.append(Case("native header not json", _write(directory, "bad_header.safetensors", broken), "ModelFileError",
                      ("{path}", "not valid JSON")))
    wrong = json.loads(json.dumps(header))
    wrong["__metadata__"]["graph_sha256"] = "0" * 64
    cases.append(Case("native wrong checksum", _write(directory, "bad_checksum.safetensors", native_join(wrong, body)),
                      "ModelFileError", ("{path}", "checksum does not match")))
    edited = json.loads(json.dumps(header))
    edited["__metadata__"]["graph"] = edited["__metadata__"]["graph"].replace('"relu"', '"tanh"')
    cases.append(Case("native graph edited without its checksum",
                      _write(directory, "edited.safetensors", native_join(edited, body)),
                      "ModelFileError", ("{path}", "checksum does not match")))
    for name, version, shown in (("a superscript digit", "\u00b2", "'\u00b2'"),
                                 ("5000 digits", "9" * 5000, "'" + "9" * 40 + "'... (5000 characters)")):
        odd = json.loads(json.dumps(header))
        odd["__metadata__"]["format_version"] = version
        cases.append(Case(f"native format version of {name}", _write(directory, f"version_{name.replace(' ', '_')}"
                                                                                 f".safetensors", native_join(odd, body)),
                          "ModelFileError", ("{path}", f"format version {shown} is not a version number")))
    claim = {"w": {"dtype": "F32", "shape": [268435456], "data_offsets": [0, GIB]}, "__metadata__": header["__metadata__"]}
    cases.append(Case("native claims 1 GiB", _write(directory, "claims_1gib.safetensors", native_join(claim, b"\0" * 64)),
                      "ModelFileError", ("{path}", "tensor 'w'", "1073741824")))
    cases.append(Case("native unknown op", _write(directory, "unknown_op.safetensors",
                                                  with_graph(data, lambda d: d["nodes"][1].update(op="frobnicate"))),
                      "ModelFileError", ("{path}", "'frobnicate'")))
    cases.append(Case("native negative input dim", _write(directory, "negative_dim.safetensors",
                                                          with_graph(data, lambda d: d["inputs"][0].update(
                                                              shape=[-3, 4]))),
                      "ModelFileError", ("{path}", "[-3, 4]")))
    cases.append(Case("native input tree out of range", _write(directory, "bad_tree.safetensors",
                                                               with_graph(data, lambda d: d.update(
                                                                   input_tree={"tuple": [{"tuple": [7]},
                                                                                         {"dict": []}]}))),
                      "ModelFileError", ("{path}", "input tree")))
    cases.append(Case("native input of 16 TB", _write(directory, "huge_input.safetensors", with_graph(data, _huge_batch)),
                      "ShapeError", ("x=1000000000000x4", "GiB", "more than this machine's")))
    eps = with_graph(native_bytes(directory, conv=True),
                     lambda d: next(n for n in d["nodes"] if n["op"] == "batch_norm")["attrs"].update(eps=None))
    cases.append(Case("native attribute no kernel takes", _write(directory, "bad_eps.safetensors", eps),
                      "ModelFileError", ("{path}", "running the model failed", "TypeError"),
                      api={"latency": True, "repeat": 1, "warmup": 0}, cli=("--latency", "--repeat", "1", "--warmup", "0")))
    cases += nested_json_cases(directory)
    native = _write(directory, "mlp.safetensors", data)
    cases.append(Case("native file on other shapes", native, "ShapeError", ("takes x=3x4", "got x=5x4"),
                      api={"input_shape": (5, 4)}, cli=("-i", "5x4")))
    cases.append(Case("two shapes for a one-input native file", native, "ShapeError", ("2 input shapes",),
                      api={"input_shape": [(3, 4), (3, 4)]}, cli=("-i", "3x4", "-i", "3x4")))
    return cases


DEEP = 100000   # levels of nesting: JSON that Python's parser refuses with RecursionError


def _deep_array() -> bytes:
    return b"[" * DEEP + b"]" * DEEP


def _safetensors(header: bytes) -> bytes:
    return len(header).to_bytes(8, "little") + header


def nested_json_cases(directory: str) -> list:
    """Headers and configs of JSON nested 100,000 deep (200 KB): refused as not what they claim to
    be, whichever reader meets them first (the file sniffer, the native reader, the weights
    reader, a Hugging Face folder's config)."""
    cases = []
    for name, header in (("an array", _deep_array()),
                         ("a tensor entry", b'{"w":' + _deep_array() + b"}"),
                         ("a weights file's entry", b'{"__metadata__":{"format":"pt"},"w":' + _deep_array() + b"}")):
        path = _write(directory, f"nested_{name.split()[-1]}.safetensors".replace("'", ""), _safetensors(header))
        cases.append(Case(f"safetensors header of {name} nested {DEEP} deep", path, "ModelFileError",
                          ("{path}", "not a safetensors header", "nested too deeply")))
    folder = os.path.join(directory, "nested_config")
    os.makedirs(folder, exist_ok=True)
    config = _write(folder, "config.json", _deep_array())
    cases.append(Case(f"Hugging Face config.json nested {DEEP} deep", folder, "ModelFileError",
                      (config, "nested too deeply")))
    return cases


def _huge_batch(doc: dict) -> None:
    # a consistent graph whose input claims 10**12 rows: the file stays a few KB
    for value in doc["inputs"] + [o for n in doc["nodes"] for o in n["outputs"]]:
        value["shape"][0] = 10 ** 12


FACTORIES = '''\
import flopcount.runtime as rt


def good():
    return rt.nn.Linear(4, 2)


def raises():
    raise RuntimeError("checkpoint not found")


def not_a_module():
    return {"weights": 1}


class Yields(rt.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = rt.nn.Linear(4, 2)

    def forward(self, x):
        yield self.fc(x)


def yields():
    return Yields()


def takes(width=4):
    return rt.nn.Linear(4, width)


def elementwise():
    return rt.nn.ReLU()  # takes an input of any rank
'''

# strings that Python's parser refuses with RecursionError and MemoryError, not SyntaxError
DEEP_LITERALS = {"30000 plus terms": "+".join(["1"] * 30000), "100000 minus signs": "-" * 100000 + "1"}


def factory_cases(directory: str) -> list:
    path = _write(directory, "factories.py", FACTORIES)
    syntax = _write(directory, "syntax_error.py", "def make(:\n")
    shape = ("-i", "3x4")
    return [
        Case("factory raises", f"{path}:raises", "ModelFileError", ("raises raised RuntimeError: checkpoint not found",),
             api={"input_shape": (3, 4)}, cli=shape),
        Case("factory returns a non-module", f"{path}:not_a_module", "ModelFileError",
             ("returned dict, not a flopcount.runtime.nn.Module",), api={"input_shape": (3, 4)}, cli=shape),
        Case("factory missing", f"{path}:absent", "ModelFileError", ("has no function 'absent'", "good"),
             api={"input_shape": (3, 4)}, cli=shape),
        Case("factory file with a syntax error", f"{syntax}:make", "ModelFileError",
             ("running the file failed: SyntaxError",), api={"input_shape": (3, 4)}, cli=shape),
        Case("negative dim", f"{path}:good", "ShapeError", ("-3",), api={"input_shape": (1, -3)}, cli=("-i", "1,-3")),
        Case("zero dim", f"{path}:good", "ShapeError", ("0",), api={"input_shape": (0, 4)}, cli=("-i", "0x4")),
        Case("non-integer dim", f"{path}:good", "ShapeError", ("2.5",), api={"input_shape": (2.5, 4)},
             cli=("-i", "2.5x4")),
        Case("too many inputs for forward", f"{path}:good", "ShapeError", ("too many positional arguments",),
             api={"input_shape": [(3, 4), (3, 4)]}, cli=("-i", "3x4", "-i", "3x4")),
        Case("an input forward lacks", f"{path}:good", "ShapeError", ("no parameter 'mask'",),
             api={"input_shape": {"x": (3, 4), "mask": (3, 4)}}, cli=("-i", "x=3x4", "-i", "mask=3x4")),
        Case("an input with 65 dimensions", f"{path}:elementwise", "ShapeError", ("input #0 has 65 dimensions",),
             api={"input_shape": (1,) * 65}, cli=("-i", "x".join(["1"] * 65))),
        Case("a superscript digit in a shape", f"{path}:good", "ShapeError", ("4\u00b2",),
             api={"input_shape": (3, "4\u00b2")}, cli=("-i", "3x4\u00b2")),
    ] + [
        Case(f"forward returns a generator ({mode} view)", f"{path}:yields", "UnsupportedValueError",
             ("the model's output is or holds a generator", "a forward that yields"),
             api={"input_shape": (3, 4), "mode": mode}, cli=("-i", "3x4", "--mode", mode))
        for mode in ("graph", "eager")
    ] + [
        Case(f"factory argument of {name}", f"{path}:takes", "FlopcountError",
             ("--factory-arg", "nested too deeply to read as a Python literal"),
             cli=("-i", "3x4", "--factory-arg", f"width={text}"), where=("cli",))
        for name, text in DEEP_LITERALS.items()
    ] + [
        Case("a shape of 5000 digits", f"{path}:good", "ShapeError", ("(5002 characters)", "at most 18 digits"),
             cli=("-i", "3x" + "9" * 5000), where=("cli",)),
        Case("a dimension of 5000 digits", f"{path}:good", "ShapeError", ("<an integer of 16610 bits>",),
             api={"input_shape": (3, 10 ** 5000 - 1)}, where=("api",)),
    ]


def build(directory: str = DEFAULT_DIR) -> list:
    """Write every bad input into ``directory`` and return their Cases."""
    os.makedirs(directory, exist_ok=True)
    cases = native_cases(directory) + factory_cases(directory)
    try:
        _onnx()
    except ImportError:  # the ONNX cases need the onnx package to be written
        return cases
    return onnx_cases(directory) + cases


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_DIR
    made = build(target)
    width = max(len(c.name) for c in made)
    for case in made:
        print(f"{case.name:<{width}}  {case.error:<18}  {case.model}")
