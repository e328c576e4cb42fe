"""ONNX's operator conformance suite through ``benchmarks/onnx_conformance.py``: the vendored
subset in ``tests/data/onnx/node`` always (every test passes), and the whole suite when
``../shared/onnx/node-tests.tgz`` lies beside the checkout (or ``FLOPCOUNT_ONNX_NODE_TESTS``
names it): no output wrong, no crash, no hang, and at least 700 of the 727 NN-op tests and
1,400 of all 1,802 pass."""

from __future__ import annotations

import importlib.util
import os
import pathlib

import pytest

pytest.importorskip("onnx")

ROOT = pathlib.Path(__file__).resolve().parents[3]
SUBSET = ROOT / "tests" / "data" / "onnx" / "node"
SUITE = pathlib.Path(os.environ.get("FLOPCOUNT_ONNX_NODE_TESTS", ROOT.parent / "shared" / "onnx" / "node-tests.tgz"))


def _runner():
    spec = importlib.util.spec_from_file_location("_onnx_conformance", ROOT / "benchmarks" / "onnx_conformance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(runner, folder, names):
    results = runner.run_all(str(folder), names, jobs=2, timeout=120, memory_limit=4 << 30)
    failed = {n: r for n, r in results.items() if r["outcome"] != "pass"}
    return results, failed


def vendored_ops() -> set:
    """The op types the vendored subset tests, domain-qualified outside the default domain."""
    import onnx

    found = set()
    for path in SUBSET.glob("test_*/model.onnx"):
        for node in onnx.load(str(path), load_external_data=False).graph.node:
            found.add(node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}")
    return found


def test_the_vendored_subset_passes():
    runner = _runner()
    names = sorted(p.name for p in SUBSET.iterdir() if (p / "model.onnx").exists())
    assert len(names) >= 40
    results, failed = _run(runner, SUBSET, names)
    assert not failed, "\n".join(f"{n}: {r['outcome']}: {r['detail']}" for n, r in failed.items())


def test_the_nn_op_list_names_727_tests_of_the_suite():
    runner = _runner()
    if not SUITE.exists():
        pytest.skip(f"the suite is not at {SUITE}")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = runner.unpack(str(SUITE), tmp)
        names = sorted(os.listdir(folder))
        ops = runner.op_of_tests(folder, names)
    assert len(names) == 1802
    assert sum(ops[n] in runner.NN_OPS for n in names) == 727


def test_the_whole_suite():
    runner = _runner()
    if not SUITE.exists():
        pytest.skip(f"the suite is not at {SUITE}")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = runner.unpack(str(SUITE), tmp)
        names = sorted(n for n in os.listdir(folder) if (pathlib.Path(folder) / n / "model.onnx").exists())
        ops = runner.op_of_tests(folder, names)
        results, _ = _run(runner, folder, names)
    bad = {n: r for n, r in results.items() if r["outcome"] in runner.FAILURES}
    assert not bad, "\n".join(f"{n}: {r['outcome']}: {r['detail']}" for n, r in sorted(bad.items()))
    nn = runner.tally(results, ops, set(runner.NN_OPS))
    every = runner.tally(results, ops)
    assert nn["pass"] >= 700 and every["pass"] >= 1400, f"NN ops {dict(nn)}, all {dict(every)}"
