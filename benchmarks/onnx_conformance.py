"""ONNX's operator conformance suite (the backend node tests) through flopcount's importer and
executor: every test's model is loaded with ``rt.onnx.load``, run on the test's inputs, and its
outputs compared with the expected ones as ONNX's own backend test runner compares them.

    python benchmarks/onnx_conformance.py installed --details
    python benchmarks/onnx_conformance.py ../shared/onnx/node-tests.tgz

SOURCE is ``installed`` (the node tests the installed onnx package generates, written into a
temporary folder), the suite's ``.tgz`` (unpacked into one) or a folder holding the ``test_*``
folders (directly or under ``onnx/backend/test/data/node``). Each test ends as:

* pass        - every output has the expected dtype, shape and values (rtol 1e-3, atol 1e-7,
                as ``onnx.backend.test.runner``; bfloat16 outputs with rtol 2**-6; the few tests
                in ``RTOL_OVERRIDES`` with the tolerance given there, and why);
* wrong       - an output differs (values, dtype, shape or count);
* unsupported - flopcount refused with a one-line ``UnsupportedOpError``;
* crash       - any other exception, a refusal longer than one line, or the worker died;
* hang        - no answer within ``--timeout`` seconds (the worker is killed, the run goes on).

Tests run in worker processes (``--jobs``), one test at a time each. The table gives these
per op type, then totals for all tests and for the NN-op tests (``NN_OPS`` below). Exit code 1
when any test is wrong, crashed or hung (``--fail-on`` to change that), else 0.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import multiprocessing
import multiprocessing.connection
import os
import platform
import re
import sys
import tarfile
import tempfile
import time
from collections import Counter, defaultdict

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core per worker: the workers share the machine
os.environ.setdefault("OMP_NUM_THREADS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

OUTCOMES = ("pass", "wrong", "unsupported", "crash", "hang")
FAILURES = ("wrong", "crash", "hang")

# ONNX's backend test runner compares every node test with these (onnx/backend/test/loader and
# runner: the node cases set no other tolerance); bfloat16 outputs get two bfloat16 ulps
RTOL, ATOL, BFLOAT16_RTOL = 1e-3, 1e-7, 2.0 ** -6

# Tests whose expected outputs are less exact than the float16 rounding of the true values, with
# the tolerance that admits a correctly rounded answer (as onnxruntime's backend tests keep
# per-test tolerances). The fp16 causal attention's expected output comes from ONNX's reference
# softmax taken step by step in float16 (exp, sum and divide each rounded), up to 0.45% from the
# true probabilities; flopcount's softmax is the correctly rounded one, 0.12% from the expected.
RTOL_OVERRIDES = {"test_attention_4d_causal_fp16_expanded": 2e-3}

# The operators common in vision and language models: matrix products and convolutions, the
# normalizations, pooling and resizing, attention, the usual activations and elementwise
# arithmetic, the reductions models end with, and the shape ops exporters emit around them. The
# suite holds 727 tests of these (their ``*_expanded`` forms included). Training, classical-ML,
# string, sequence, signal-processing, random, quantization and dtype-conversion (Cast) ops are
# not in it, nor the rarer activations and comparisons; they count in the "all" total. (onnx
# 1.23's generators make 765 tests of them: opset 25's windowed attention and more.)
NN_OPS = (
    "MatMul", "Gemm", "Einsum", "Conv", "ConvTranspose",
    "BatchNormalization", "LayerNormalization", "GroupNormalization", "InstanceNormalization",
    "RMSNormalization",
    "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Resize",
    "Attention", "RotaryEmbedding", "Softmax",
    "Relu", "LeakyRelu", "PRelu", "Gelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Erf", "Clip",
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Exp", "Neg", "Where", "Equal", "Less",
    "ReduceMean", "ReduceSum", "ReduceMax", "ArgMax", "TopK",
    "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Expand", "Concat", "Split", "Slice",
    "Gather", "Shape", "Range", "Trilu", "ConstantOfShape", "Pad", "Constant",
)


# --- finding the tests -------------------------------------------------------------------------

INSTALLED = "installed"  # SOURCE naming the node tests the installed onnx package generates


def generate(into: str) -> str:
    """Write the node tests of the installed onnx package (its ``backend/test/case/node``
    generators, the ones the suite's files were made from) into ``into`` in the suite's layout:
    ``test_*/model.onnx`` and ``test_data_set_N/{input,output}_K.pb``."""
    import warnings

    from onnx import numpy_helper
    from onnx.backend.test.case import node

    def proto(value, value_info):
        kind = value_info.type.WhichOneof("value")
        if kind == "sequence_type":
            return numpy_helper.from_list(value, value_info.name)
        if kind == "optional_type":
            return numpy_helper.from_optional(value, value_info.name)
        if kind == "map_type":
            return numpy_helper.from_dict(value, value_info.name)
        return value if hasattr(value, "SerializeToString") else numpy_helper.from_array(value, value_info.name)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators divide by zero on purpose, for inf cases
        cases = node.collect_testcases(None)
    for case in cases:
        folder = os.path.join(into, case.name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        graph = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            data = os.path.join(folder, f"test_data_set_{i}")
            os.makedirs(data, exist_ok=True)
            for prefix, values, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
                for k, value in enumerate(values):
                    with open(os.path.join(data, f"{prefix}_{k}.pb"), "wb") as f:
                        f.write(proto(value, infos[k]).SerializeToString())
    return into


def unpack(source: str, into: str) -> str:
    """The folder of ``test_*`` folders in ``source`` (a .tgz unpacked into ``into``, a folder, or
    ``installed``: the node tests the installed onnx package generates, written into ``into``)."""
    if source == INSTALLED:
        return generate(into)
    if os.path.isfile(source):
        with tarfile.open(source) as tar:
            tar.extractall(into, filter="data")
        source = into
    for candidate in (os.path.join(source, "onnx", "backend", "test", "data", "node"), source):
        if glob.glob(os.path.join(candidate, "test_*", "model.onnx")):
            return candidate
    raise SystemExit(f"{source}: no test_*/model.onnx inside")


def op_of_tests(folder: str, names: list) -> dict:
    """{test name: the ONNX op type it tests}: the op of its one-node model; an ``*_expanded``
    test (the op written as its function body) takes the op of the test it expands."""
    import onnx

    single = {}
    for name in names:
        model = onnx.load(os.path.join(folder, name, "model.onnx"), load_external_data=False)
        kinds = {n.op_type for n in model.graph.node}
        single[name] = kinds.pop() if len(kinds) == 1 else None
    out = {}
    for name in names:
        base = re.sub(r"_expanded(_ver\d+)?$", "", name)
        out[name] = single.get(base) or single[name] or "?"
    return out


# --- one test (in a worker) --------------------------------------------------------------------

def _read_value(path: str, type_proto):
    """A test's input or output file as a numpy array (a list for a sequence; None for an
    empty optional), read as the value's declared type says (as ONNX's runner reads them)."""
    import onnx
    from onnx import numpy_helper

    with open(path, "rb") as f:
        data = f.read()
    kind = type_proto.WhichOneof("value") if type_proto is not None else "tensor_type"
    if kind == "sequence_type":
        proto = onnx.SequenceProto()
        proto.ParseFromString(data)
        return numpy_helper.to_list(proto)
    if kind == "optional_type":
        proto = onnx.OptionalProto()
        proto.ParseFromString(data)
        return numpy_helper.to_optional(proto)
    proto = onnx.TensorProto()
    proto.ParseFromString(data)
    return numpy_helper.to_array(proto)


def _compare(expected: list, got: list, rtol: float = RTOL) -> str | None:
    """None when ``got`` matches ``expected`` as ONNX's runner decides, else what differs."""
    import numpy as np

    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for i, (want, have) in enumerate(zip(expected, got)):
        if isinstance(want, list) or want is None:
            return f"output {i}: a sequence or optional value"
        if tuple(have.shape) != tuple(want.shape):
            return f"output {i}: shape {tuple(have.shape)}, expected {tuple(want.shape)}"
        if have.dtype != want.dtype:
            return f"output {i}: dtype {have.dtype}, expected {want.dtype}"
        if want.dtype == object:
            if not np.array_equal(have, want):
                return f"output {i}: strings differ"
            continue
        if want.dtype.name == "bfloat16":
            rtol = max(rtol, BFLOAT16_RTOL)
        if want.dtype.kind not in "biufc":  # ml_dtypes' types compare through float32
            want, have = want.astype(np.float32), have.astype(np.float32)
        try:
            np.testing.assert_allclose(have, want, rtol=rtol, atol=ATOL)
        except AssertionError as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            detail = "; ".join(line for line in lines if line.startswith(("Mismatched", "Max abs", "Max rel")))
            return f"output {i}: values differ ({detail or lines[0]})"
    return None


def run_test(folder: str) -> dict:
    """Load, run and compare one test: {"outcome", "detail"}."""
    import numpy as np
    import onnx

    import flopcount.runtime as rt
    from flopcount.runtime.errors import UnsupportedOpError

    model_path = os.path.join(folder, "model.onnx")
    model = onnx.load(model_path, load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    declared = [v for v in model.graph.input if v.name not in initializers]
    data = os.path.join(folder, "test_data_set_0")
    n_in = len(glob.glob(os.path.join(data, "input_*.pb")))
    n_out = len(glob.glob(os.path.join(data, "output_*.pb")))
    inputs = [_read_value(os.path.join(data, f"input_{i}.pb"), declared[i].type if i < len(declared) else None)
              for i in range(n_in)]
    expected = [_read_value(os.path.join(data, f"output_{i}.pb"), model.graph.output[i].type)
                for i in range(n_out)]
    try:
        with np.errstate(all="ignore"):
            feeds = {v.name: x for v, x in zip(declared, inputs)}
            shapes = {name: np.shape(x) for name, x in feeds.items() if isinstance(x, np.ndarray)}
            graph = rt.onnx.load(model_path, input_shapes=shapes, input_values=feeds, strict=True)
            args = [rt.tensor(feeds[v.name]) for v in graph.inputs]
            result = rt.GraphModule(graph)(*args)
            result = list(result) if isinstance(result, (tuple, list)) else [result]
            got = [t.numpy() for t in result]
    except UnsupportedOpError as exc:
        message = str(exc)
        if "\n" in message:
            return {"outcome": "crash", "detail": f"a refusal of several lines: {message[:300]!r}"}
        return {"outcome": "unsupported", "detail": message}
    except Exception as exc:  # noqa: BLE001  (anything else is a crash, reported as such)
        text = " ".join(str(exc).split())
        return {"outcome": "crash", "detail": f"{type(exc).__name__}: {text[:300]}"}
    problem = _compare(expected, got, RTOL_OVERRIDES.get(os.path.basename(folder), RTOL))
    return {"outcome": "pass", "detail": ""} if problem is None else {"outcome": "wrong", "detail": problem}


def _worker(conn, memory_limit: int) -> None:
    if memory_limit:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        except (ImportError, ValueError, OSError):
            pass
    import warnings

    warnings.simplefilter("ignore")
    while True:
        folder = conn.recv()
        if folder is None:
            return
        try:
            result = run_test(folder)
        except BaseException as exc:  # noqa: BLE001  (reading the test's files failed)
            result = {"outcome": "crash", "detail": f"{type(exc).__name__}: {exc}"[:300]}
        conn.send(result)


# --- the pool ----------------------------------------------------------------------------------

class _Slot:
    """One worker process and the test it is running."""

    def __init__(self, context, memory_limit: int):
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker, args=(child, memory_limit), daemon=True)
        self.process.start()
        child.close()
        self.test = None
        self.started = 0.0

    def give(self, name: str, folder: str) -> None:
        self.test, self.started = name, time.monotonic()
        self.conn.send(folder)

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def run_all(folder: str, names: list, jobs: int, timeout: float, memory_limit: int,
            progress=None) -> dict:
    """{test name: {"outcome", "detail", "seconds"}} for every test in ``names``."""
    context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    pending = list(reversed(names))
    results: dict = {}
    slots = [_Slot(context, memory_limit) for _ in range(max(1, min(jobs, len(names))))]
    try:
        for slot in slots:
            if pending:
                name = pending.pop()
                slot.give(name, os.path.join(folder, name))
        while any(s.test for s in slots):
            busy = [s for s in slots if s.test]
            now = time.monotonic()
            wait = max(0.0, min(s.started + timeout - now for s in busy))
            ready = multiprocessing.connection.wait([s.conn for s in busy] + [s.process.sentinel for s in busy], wait)
            for i, slot in enumerate(slots):
                if not slot.test:
                    continue
                name, seconds = slot.test, time.monotonic() - slot.started
                result = None
                if slot.conn in ready:
                    try:
                        result = slot.conn.recv()
                    except (EOFError, OSError):
                        result = None
                if result is None and (slot.process.sentinel in ready or slot.conn in ready):
                    code = slot.process.exitcode
                    result = {"outcome": "crash", "detail": f"the worker died (exit code {code})"}
                elif result is None and seconds >= timeout:
                    result = {"outcome": "hang", "detail": f"no answer after {timeout:g} s"}
                if result is None:
                    continue
                result["seconds"] = round(seconds, 3)
                results[name] = result
                if progress:
                    progress(name, result, len(results), len(names))
                slot.test = None
                if not slot.process.is_alive() or result["outcome"] == "hang":
                    slot.stop(kill=True)  # a fresh worker for the next test
                    slot = slots[i] = _Slot(context, memory_limit)
                if pending:
                    nxt = pending.pop()
                    slot.give(nxt, os.path.join(folder, nxt))
    finally:
        for slot in slots:
            slot.stop(kill=bool(slot.test))
    return results


# --- the table ---------------------------------------------------------------------------------

def tally(results: dict, ops: dict, only=None) -> Counter:
    counts: Counter = Counter()
    for name, result in results.items():
        if only is None or ops[name] in only:
            counts[result["outcome"]] += 1
    return counts


def table(results: dict, ops: dict) -> str:
    """A markdown table: one row per op type, then the totals for NN ops and for all tests."""
    per_op: dict = defaultdict(Counter)
    for name, result in results.items():
        per_op[ops[name]][result["outcome"]] += 1
    header = "| op | tests | " + " | ".join(OUTCOMES) + " |"
    lines = [header, "|" + " --- |" * (len(OUTCOMES) + 2)]

    def row(label: str, counts: Counter) -> str:
        return f"| {label} | {sum(counts.values())} | " + " | ".join(str(counts[o]) for o in OUTCOMES) + " |"

    for op in sorted(per_op, key=str.lower):
        lines.append(row(op + (" (NN)" if op in NN_OPS else ""), per_op[op]))
    lines.append(row("**NN ops**", tally(results, ops, set(NN_OPS))))
    lines.append(row("**all**", tally(results, ops)))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="node-tests.tgz, a folder of test_* folders, or 'installed' "
                        "(the node tests the installed onnx package generates)")
    parser.add_argument("-k", "--filter", default="", help="run only the tests whose name matches this regex")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a test counts as a hang")
    parser.add_argument("--memory", type=float, default=4.0, help="address-space limit per worker, GiB (0: none)")
    parser.add_argument("--details", action="store_true", help="list every test that did not pass, and why")
    parser.add_argument("--json", help="write {test: {op, outcome, detail, seconds}} to this file")
    parser.add_argument("--fail-on", default=",".join(FAILURES),
                        help=f"outcomes that make the exit code 1 (default {','.join(FAILURES)})")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = unpack(args.source if args.source == INSTALLED else os.path.abspath(args.source), tmp)
        names = sorted(n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n, "model.onnx")))
        if args.filter:
            names = [n for n in names if re.search(args.filter, n)]
        ops = op_of_tests(folder, names)

        def progress(name, result, done, total):
            if not args.quiet and sys.stderr.isatty():
                print(f"\r{done}/{total} {name[:60]:<60}", end="", file=sys.stderr, flush=True)

        results = run_all(folder, names, args.jobs, args.timeout, int(args.memory * 2**30), progress)
        if not args.quiet and sys.stderr.isatty():
            print(file=sys.stderr)
    seconds = time.perf_counter() - started

    print(f"date: {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"command: python benchmarks/onnx_conformance.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(f"{len(names)} tests in {seconds:.0f} s with {args.jobs} worker(s)\n")
    print(table(results, ops))
    for label, only in (("NN ops", set(NN_OPS)), ("all", None)):
        counts = tally(results, ops, only)
        print(f"\n{label}: {counts['pass']} of {sum(counts.values())} pass; "
              + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES[1:]))
    if args.details:
        print()
        for name in names:
            result = results[name]
            if result["outcome"] != "pass":
                print(f"{result['outcome']:<11} {name} [{ops[name]}]: {result['detail']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({n: {"op": ops[n], **results[n]} for n in names}, f, indent=1)
    failing = {o.strip() for o in args.fail_on.split(",") if o.strip()}
    return 1 if any(results[n]["outcome"] in failing for n in names) else 0


if __name__ == "__main__":
    sys.exit(main())
