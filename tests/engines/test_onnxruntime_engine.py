"""engine="onnxruntime": an ONNX file timed by onnxruntime's profiler node by node, each of its
optimized graph's nodes joined with flopcount's counts of the file's nodes it computes (the
join is checked, never the speed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

import flopcount  # noqa: E402
from flopcount.engines import onnxruntime_engine  # noqa: E402
from flopcount.report.export import to_dict  # noqa: E402
from flopcount.runtime.errors import FlopcountError  # noqa: E402

DATA = Path(__file__).parents[1] / "data" / "onnx"
CNN, BERT = str(DATA / "cnn_torchscript_op13.onnx"), str(DATA / "bert_torchscript_op17.onnx")


def test_a_cnn_whose_convs_onnxruntime_fuses_and_lays_out_in_nchwc():
    """onnxruntime runs Conv+Relu as one NCHWc conv between ReorderOutput nodes: each conv node
    carries both file nodes' counts, the reorders are listed as joined to nothing, and every
    FLOP of the file lands on exactly one onnxruntime node."""
    counted = flopcount.profile(CNN, input_shape=(2, 3, 32, 32))
    timed = flopcount.profile(CNN, input_shape=(2, 3, 32, 32), engine="onnxruntime", threads=1, repeat=3)
    assert timed.engine == "onnxruntime" and (timed.macs, timed.flops) == (counted.macs, counted.flops)
    nodes = timed.engine_nodes
    assert nodes and all(n.latency_ms >= 0 for n in nodes)
    assert sum(n.flops for n in nodes) == timed.flops and sum(n.macs for n in nodes) == timed.macs
    first = next(n for n in nodes if n.op_type == "Conv")
    assert sorted(first.sources) == ["/conv1/Conv", "/relu/Relu"]   # the fused Conv+Relu
    assert first.flops == sum(o.flops for o in counted.by_op("forward") if o.source in first.sources)
    unjoined = [n for n in nodes if not n.joined]
    assert unjoined and {n.op_type for n in unjoined} <= {"ReorderInput", "ReorderOutput"}
    sources = [s for n in nodes for s in n.sources]
    assert len(sources) == len(set(sources))   # no file node joined twice
    assert any("joined to no node of the file" in note for note in timed.notes)
    assert not any("no onnxruntime node was joined" in note for note in timed.notes)
    # rows: each scope sums the onnxruntime time of the nodes in it; the root is every node's
    assert timed.root.latency_ms == pytest.approx(sum(n.latency_ms for n in nodes))
    # the fused Conv+Relu's time shared over its two ops by FLOPs: conv1's row and relu's
    conv, relu = (next(o for o in timed.by_op("forward") if o.source == s) for s in ("/conv1/Conv", "/relu/Relu"))
    assert conv.latency_ms + relu.latency_ms == pytest.approx(first.latency_ms)
    assert conv.latency_ms / first.latency_ms == pytest.approx(conv.flops / (conv.flops + relu.flops))
    assert timed.row("conv1").latency_ms == pytest.approx(conv.latency_ms)
    assert timed.row("relu").latency_ms == pytest.approx(relu.latency_ms)
    assert onnxruntime_engine.SHARED_NOTE in timed.notes
    assert timed.latency_ms > 0 and timed.latency_min_ms <= timed.latency_ms
    kinds = onnxruntime_engine.by_op_type(nodes)
    assert sum(k["flops"] for k in kinds) == timed.flops
    assert {k["op_type"] for k in kinds} >= {"Conv", "Gemm", "MaxPool"}
    exported = to_dict(timed)["engine_nodes"]
    assert len(exported) == len(nodes) and exported[0]["flops_per_second"] == nodes[0].flops_per_second


def test_the_op_views_show_onnxruntime_s_times():
    """--by op and --by op-type: every joined node's time is on the file's ops it covers, so the
    op records and the op-type summary add up to the joined nodes' time."""
    timed = flopcount.profile(CNN, input_shape=(2, 3, 32, 32), engine="onnxruntime", threads=1, repeat=2)
    joined = sum(n.latency_ms for n in timed.engine_nodes if n.joined)
    records = timed.by_op("forward")
    covered = {s for n in timed.engine_nodes for s in n.sources}
    assert all(r.latency_ms is not None for r in records if r.source in covered)
    assert sum(r.latency_ms or 0.0 for r in records) == pytest.approx(joined)
    assert sum(s.latency_ms or 0.0 for s in timed.by_op_type()) == pytest.approx(joined)
    op_view = timed.tabulate("plain", by="op")
    conv_line = next(line for line in op_view.splitlines() if line.split()[:2] == ["conv1/conv", "conv"])
    assert conv_line.split()[-3] in ("µs", "ms")            # a Latency cell, not "-"


def test_a_transformer_onnxruntime_fuses_into_its_own_ops():
    """BERT: onnxruntime fuses layer norms, GELU and attention into its com.microsoft ops; the
    file's counts still all land on its nodes."""
    report = flopcount.profile(BERT, input_shape=(1, 16), engine="onnxruntime", threads=1, repeat=2)
    assert sum(n.flops for n in report.engine_nodes) == report.flops
    assert len(report.engine_nodes) < len(onnx.load(BERT).graph.node)


def test_what_the_engine_refuses():
    with pytest.raises(FlopcountError, match="engine 'onnxruntime' times an ONNX file"):
        flopcount.profile("resnet18", input_shape=(1, 3, 32, 32), engine="onnxruntime")
    with pytest.raises(FlopcountError, match="engine 'onnxruntime' times the ONNX file as it is"):
        flopcount.profile(CNN, input_shape=(1, 3, 32, 32), engine="onnxruntime", dtype="float16")


def test_feeds_for_inputs_without_data():
    """A meta input (counting without data) gets seeded values of its shape for onnxruntime."""
    from flopcount.api.engine_runs import _feeds
    import flopcount.runtime as rt

    class Value:
        def __init__(self, name):
            self.name = name

    class Net:
        inputs = [Value("x"), Value("ids")]

    with rt.meta():
        x, ids = rt.zeros(2, 3), rt.zeros(2, 5, dtype=rt.int64)
    feeds = _feeds(Net(), (x, ids), {}, {"k": np.array([3])})
    assert feeds["x"].shape == (2, 3) and feeds["x"].dtype == np.float32
    assert feeds["ids"].dtype == np.int64 and not feeds["ids"].any() and feeds["k"].tolist() == [3]
