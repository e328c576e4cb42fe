"""Mutations of valid model files and the one property they must keep: profiling a mutated
file gives a sound report or raises a FlopcountError; never another exception, a hang or an
unbounded allocation.

Used by ``test_fuzz.py`` (a short budget in CI) and ``benchmarks/fuzz_long.py`` (a long run).
Mutations are hypothesis strategies, so failures shrink to a small reproducible case:

* bytes: flip, overwrite, insert, delete, truncate (ONNX and native files);
* ONNX protobuf: attribute values, input and initializer dims, op types, node inputs, dropped
  nodes, opset versions, element types;
* native files: a value anywhere in the graph JSON replaced, with the checksum recomputed (a
  crafted file, which the checksum alone cannot stop), or the tensor table edited.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile

from hypothesis import strategies as st

import flopcount
from bad_corpus import CNN_FIXTURE, mlp_onnx, native_join, native_parts

RUN_LIMIT_BYTES = 64 << 20   # a mutated model is also run (latency) when its activations fit here
NASTY_INTS = [-(2 ** 63), -(2 ** 31), -100, -2, -1, 0, 1, 2, 3, 7, 64, 2 ** 31 - 1, 2 ** 40, 2 ** 63 - 1]


# --- seeds: valid files and how to profile them -------------------------------------------------

def onnx_seeds(extended: bool = False) -> list:
    """[(name, bytes, profile() keyword arguments)] of valid ONNX files; ``extended`` adds
    PyTorch's exports of BERT and GPT-2 (larger, slower to mutate and import)."""
    files = [(CNN_FIXTURE, {"input_shape": [(1, 3, 32, 32)]})]
    if extended:
        fixtures = os.path.dirname(CNN_FIXTURE)
        files += [(os.path.join(fixtures, "bert_torchscript_op17.onnx"), {"input_shape": [(1, 16)]}),
                  (os.path.join(fixtures, "gpt2_dynamo_op20.onnx"), {"input_shape": [(1, 16)]})]
    out = [("mlp.onnx", mlp_onnx().SerializeToString(), {})]
    for path, api in files:
        with open(path, "rb") as f:
            out.append((os.path.basename(path), f.read(), api))
    return out


def native_seeds() -> list:
    """[(name, bytes, profile() keyword arguments)] of valid native files."""
    import flopcount.runtime as rt

    nn = rt.nn
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    cnn = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, net, x in (("mlp.safetensors", mlp, rt.randn(3, 4)), ("cnn.safetensors", cnn, rt.randn(1, 3, 8, 8))):
            path = os.path.join(tmp, name)
            rt.save(net.eval(), path, example_inputs=(x,))
            with open(path, "rb") as f:
                out.append((name, f.read(), {}))
    return out


# --- byte mutations ----------------------------------------------------------------------------

@st.composite
def mutated_bytes(draw, data: bytes) -> bytes:
    """``data`` with one to three byte-level edits."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "overwrite", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "flip" and out:
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=16))
            out[at:at + len(chunk)] = chunk
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del out[at:at + draw(st.integers(1, 16))]
        else:
            del out[at:]
    return bytes(out)


# --- ONNX protobuf mutations -------------------------------------------------------------------

def _int_values():
    return st.one_of(st.sampled_from(NASTY_INTS), st.integers(-8, 64))


@st.composite
def mutated_onnx(draw, data: bytes) -> bytes:
    """A valid ONNX file with one to three structural edits (the protobuf stays readable)."""
    import onnx
    from onnx import helper

    from flopcount.runtime.onnx import supported_ops

    model = onnx.load_from_string(data)
    graph = model.graph
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["attribute", "input dim", "initializer dims", "op type", "node input",
                                     "drop node", "opset", "elem type", "add attribute"]))
        nodes = list(graph.node)
        node = nodes[draw(st.integers(0, len(nodes) - 1))] if nodes else None
        if kind == "attribute" and node is not None and node.attribute:
            attr = node.attribute[draw(st.integers(0, len(node.attribute) - 1))]
            if attr.type == onnx.AttributeProto.INT:
                attr.i = draw(_int_values())
            elif attr.type == onnx.AttributeProto.INTS and attr.ints:
                attr.ints[draw(st.integers(0, len(attr.ints) - 1))] = draw(_int_values())
            elif attr.type == onnx.AttributeProto.FLOAT:
                attr.f = draw(st.floats(allow_nan=True, allow_infinity=True, width=32))
        elif kind == "add attribute" and node is not None:
            name = draw(st.sampled_from(["axis", "axes", "perm", "group", "strides", "pads", "kernel_shape",
                                         "keepdims", "transA", "alpha", "mode", "to"]))
            if name not in {a.name for a in node.attribute}:
                value = draw(st.one_of(_int_values(), st.lists(_int_values(), min_size=1, max_size=6)))
                node.attribute.append(helper.make_attribute(name, value))
        elif kind == "input dim" and graph.input:
            value = graph.input[draw(st.integers(0, len(graph.input) - 1))]
            dims = value.type.tensor_type.shape.dim
            if dims:
                dim = dims[draw(st.integers(0, len(dims) - 1))]
                if draw(st.booleans()):
                    dim.dim_value = draw(st.integers(-3, 4096))
                else:
                    dim.dim_param = draw(st.sampled_from(["batch", "n", "sequence"]))
        elif kind == "initializer dims" and graph.initializer:
            init = graph.initializer[draw(st.integers(0, len(graph.initializer) - 1))]
            if init.dims:
                init.dims[draw(st.integers(0, len(init.dims) - 1))] = draw(_int_values())
        elif kind == "op type" and node is not None:
            node.op_type = draw(st.sampled_from(supported_ops() + ["NotAnOp"]))
        elif kind == "node input" and node is not None and node.input:
            names = [v.name for v in graph.input] + [t.name for t in graph.initializer] + \
                [o for n in nodes for o in n.output] + ["", "ghost"]
            node.input[draw(st.integers(0, len(node.input) - 1))] = draw(st.sampled_from(names))
        elif kind == "drop node" and node is not None:
            graph.node.remove(node)
        elif kind == "opset" and model.opset_import:
            model.opset_import[0].version = draw(st.integers(-1, 40))
        elif kind == "elem type" and graph.input:
            graph.input[0].type.tensor_type.elem_type = draw(st.integers(0, 17))
    return model.SerializeToString()


# --- native file mutations ---------------------------------------------------------------------

def _json_paths(obj, path=()):
    """Every (path, leaf) of a JSON document, containers included (so they can be replaced too)."""
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _json_paths(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _json_paths(v, path + (i,))


def _json_values():
    leaf = st.one_of(st.none(), st.booleans(), _int_values(), st.floats(allow_nan=False, width=32),
                     st.sampled_from(["", "x", "relu", "linear", "float32", "int64", "meta", "param", "input"]))
    return st.recursive(leaf, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.sampled_from(["tuple", "list", "dict",
                                                                                       "value", "name"]),
                                                                      inner, max_size=2)), max_leaves=6)


@st.composite
def mutated_native(draw, data: bytes) -> bytes:
    """A native file with one to three values of its graph JSON or tensor table replaced; the
    checksum is recomputed, so the loader's own checks must catch what is wrong."""
    header, body = native_parts(data)
    meta = header["__metadata__"]
    doc = json.loads(meta["graph"])
    for _ in range(draw(st.integers(1, 3))):
        in_table = draw(st.integers(0, 4)) == 0
        target = header if in_table else doc
        paths = [p for p, _ in _json_paths(target) if p and p[0] != "__metadata__"]
        if not paths:
            continue
        path = paths[draw(st.integers(0, len(paths) - 1))]
        parent = target
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = draw(_json_values())
    text = json.dumps(doc)
    meta.update(graph=text, graph_sha256=hashlib.sha256(text.encode()).hexdigest())
    return native_join(header, body)


# --- the property --------------------------------------------------------------------------------

def check(data: bytes, suffix: str, api: dict, directory: str, run: bool = False) -> tuple:
    """Profile ``data`` written as a file: (outcome, message), the outcome "ok" or the
    FlopcountError's class name. Anything else propagates (the fuzz test fails on it). With
    ``run``, a file that counts and is small enough is also run once (latency), to exercise
    the kernels."""
    path = os.path.join(directory, "mutated" + suffix)
    with open(path, "wb") as f:
        f.write(data)
    try:
        report = flopcount.profile(path, **api)
        assert_sound(report)
        peak = report.memory.predicted_peak or 0
        if run and peak <= RUN_LIMIT_BYTES and report.memory.activations <= RUN_LIMIT_BYTES:
            timed = flopcount.profile(path, latency=True, warmup=0, repeat=1, **api)
            # a file without weights is counted on meta, where nothing runs
            assert timed.macs == report.macs and (timed.latency_ms is not None or timed.device == "meta")
    except flopcount.FlopcountError as exc:
        message = str(exc)
        assert message and "\n" not in message, repr(message)
        return type(exc).__name__, message
    return "ok", ""


def assert_sound(report) -> None:
    """A report's totals are non-negative integers and its root row holds them."""
    for value in (report.macs, report.flops, report.params):
        assert isinstance(value, int) and value >= 0, value
    assert report.root.macs == report.macs
    assert all(math.isfinite(v) for v in (report.macs, report.flops))


__all__ = ["onnx_seeds", "native_seeds", "mutated_bytes", "mutated_onnx", "mutated_native", "check", "assert_sound"]
