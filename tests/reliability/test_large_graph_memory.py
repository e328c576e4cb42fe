"""What a profile of a huge graph holds on to (issue: a million-node file must count within the
machine's memory): the import lets go of the ModelProto and of the tensors it traced with, the
graph view's report lets go of the graph and builds its op records only when they are read, and
those records are the ones each node's op call prices. The bytes per node are measured by
``benchmarks/scale.py``, not here (no timing or size thresholds in tests)."""

from __future__ import annotations

import gc
import weakref

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import conventions
from flopcount.recording.rows import mac_dtype, op_call
from flopcount.recording import pricing
from flopcount.runtime.graph import passes

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

CHAIN = 40


def _chain_file(tmp_path, n: int = CHAIN) -> str:
    """``n`` Relu nodes in a chain on a [1, 16] input, then a MatMul with an initializer."""
    nodes = [helper.make_node("Relu", [f"t{i}" if i else "x"], [f"t{i + 1}"], name=f"n{i}") for i in range(n)]
    nodes.append(helper.make_node("MatMul", [f"t{n}", "W"], ["y"], name="fc"))
    w = helper.make_tensor("W", TensorProto.FLOAT, [16, 4], [0.5] * 64)
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = str(tmp_path / "chain.onnx")
    onnx.save(model, path)
    return path


def _alive(type_name: str) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o).__name__ == type_name)


def test_the_import_keeps_no_model_proto_and_no_traced_tensor(tmp_path):
    path = _chain_file(tmp_path)
    before = _alive("ModelProto")
    graph = rt.onnx.load(path)
    # a ModelProto takes no weak reference: look for one among the live objects instead
    assert _alive("ModelProto") == before
    assert [n.op.name for n in graph.nodes] == ["relu"] * CHAIN + ["matmul"]
    assert [n.source for n in graph.nodes] == [f"n{i}" for i in range(CHAIN)] + ["fc"]
    assert [n.scope for n in graph.nodes] == [f"n{i}" for i in range(CHAIN)] + ["fc"]


def test_the_report_lets_go_of_the_graph_and_builds_the_same_op_records(tmp_path):
    graph = rt.onnx.load(_chain_file(tmp_path))
    # what the records were before they were built lazily: each node's op call, priced
    convention = conventions.get("flopcount")
    calls = [op_call(n) for n in graph.nodes]
    costs, owns = pricing.price(calls, convention)
    expected = [pricing.op_record(call, cost, own, name=f"{n.scope}/{n.name}", scope=n.scope, phase="forward",
                                  counted=cost is not None,
                                  params=sum(v.numel() for v in n.inputs if v is not None and v.kind == "param"),
                                  param_bytes=sum(v.nbytes for v in n.inputs if v is not None and v.kind == "param"),
                                  source=n.source, mac_dtype=mac_dtype(n) if cost and cost.macs else None)
                for call, cost, own, n in zip(calls, costs, owns, graph.nodes)]
    for record, n in zip(expected, graph.nodes):   # the op graph's wiring, which a page draws
        record.inputs = tuple(None if v is None else v.name for v in n.inputs)
        record.outputs = tuple(v.name for v in n.outputs)
        record.attrs = n.attrs
    ref = weakref.ref(graph)
    report = flopcount.profile(graph)
    del graph, calls
    gc.collect()
    assert ref() is None
    assert [r.to_dict() for r in report.ops] == [r.to_dict() for r in expected]
    fc = report.ops[-1]
    assert (fc.macs, fc.params, fc.param_bytes, fc.mac_dtype) == (16 * 4, 64, 256, "float32")
    assert report.macs == 16 * 4 and report.flops == CHAIN * 16 + 2 * 16 * 4  # a Relu: one FLOP per element; MatMul: 2 per MAC


def test_dce_in_place_returns_the_graph_itself():
    g = rt.trace(lambda x: (x.exp(), x + 1)[1], rt.randn(3))
    copy = passes.dce(g)
    assert copy is not g and [n.op_name for n in g.nodes] == ["exp", "add"]
    same = passes.dce(g, in_place=True)
    assert same is g and [n.op_name for n in g.nodes] == ["add"]


def test_a_large_table_piped_into_a_reader_that_stops_early_ends_quietly(tmp_path):
    """A table of more than RICH_MAX_ROWS rows goes to stdout a line at a time; ``| head -1``
    closing the pipe after the first line is no error (exit 0, nothing on stderr), as when the
    whole text was written in one call."""
    import os
    import subprocess
    import sys

    from flopcount.report.table import RICH_MAX_ROWS

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = _chain_file(tmp_path, RICH_MAX_ROWS + 500)  # its table is far more than a pipe's 64 KB
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-m", "flopcount", path], cwd=str(tmp_path), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = child.stdout.readline()
    child.stdout.close()
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=180) == 0, stderr
    assert first.decode().startswith("chain.onnx — graph view") and stderr == ""
