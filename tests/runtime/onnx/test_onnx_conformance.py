"""ONNX's operator conformance suite through ``benchmarks/onnx_conformance.py``: every backend
node test the installed onnx package generates (1,884 with onnx 1.23, a superset of the 1,802 in
``../shared/onnx/node-tests.tgz``): no output wrong, no crash, no hang, and at least 700 of the
NN-op tests and 1,400 of all pass. A converter whose op ONNX's suite tests needs no case of its
own: ``exercised_ops`` gives ``test_every_converter_is_exercised`` the ops of the passing tests."""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import tempfile

import pytest

pytest.importorskip("onnx")

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _runner():
    spec = importlib.util.spec_from_file_location("_onnx_conformance", ROOT / "benchmarks" / "onnx_conformance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def installed_suite() -> tuple[dict, dict, dict]:
    """The installed onnx package's node tests, run once per test session: ({test: result},
    {test: the op type it tests}, {test: every op type in its model, domain-qualified outside
    the default domain})."""
    import onnx

    runner = _runner()
    with tempfile.TemporaryDirectory() as tmp:
        folder = runner.unpack(runner.INSTALLED, tmp)
        names = sorted(p.name for p in pathlib.Path(folder).iterdir() if (p / "model.onnx").exists())
        tested = runner.op_of_tests(folder, names)
        in_model = {}
        for name in names:
            graph = onnx.load(str(pathlib.Path(folder, name, "model.onnx")), load_external_data=False).graph
            in_model[name] = {n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
                              for n in graph.node}
        results = runner.run_all(folder, names, jobs=2, timeout=120, memory_limit=4 << 30)
    return results, tested, in_model


def exercised_ops() -> set:
    """The op types that ran in a passing test of ONNX's suite (an expanded test's function body
    included), domain-qualified outside the default domain."""
    results, _, in_model = installed_suite()
    return set().union(*(in_model[n] for n, r in results.items() if r["outcome"] == "pass"))


def test_the_installed_suite_passes():
    runner = _runner()
    results, tested, _ = installed_suite()
    assert len(results) >= 1802  # onnx 1.15's suite is smaller; the test extra asks for 1.23
    bad = {n: r for n, r in results.items() if r["outcome"] in runner.FAILURES}
    assert not bad, "\n".join(f"{n}: {r['outcome']}: {r['detail']}" for n, r in sorted(bad.items()))
    nn = runner.tally(results, tested, set(runner.NN_OPS))
    overall = runner.tally(results, tested)
    assert nn["pass"] >= 700 and overall["pass"] >= 1400, (nn, overall)
    # every refusal is one line naming what is refused
    assert all(r["detail"] for r in results.values() if r["outcome"] == "unsupported")


def test_a_test_that_differs_is_reported_wrong(tmp_path):
    # the comparison can fail: a suite test whose expected output is changed by one part in 100
    import onnx
    from onnx import numpy_helper

    runner = _runner()
    folder = runner.unpack(runner.INSTALLED, str(tmp_path))
    expected = pathlib.Path(folder, "test_relu", "test_data_set_0", "output_0.pb")
    value = numpy_helper.to_array(onnx.load_tensor(str(expected)))
    assert runner.run_test(str(expected.parents[1]))["outcome"] == "pass"
    onnx.save_tensor(numpy_helper.from_array((value * 1.01 + 0.01).astype(value.dtype), "y"), str(expected))
    result = runner.run_test(str(expected.parents[1]))
    assert result["outcome"] == "wrong" and "values differ" in result["detail"]
