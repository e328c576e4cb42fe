"""Large model files: time and peak memory of ``flopcount FILE`` on each, one at a time.

    python benchmarks/scale.py make DIR            # write the files (about 3.1 GB on disk)
    python benchmarks/scale.py run DIR [CASE ...]  # run each case in a fresh process
    python benchmarks/scale.py run DIR --root OLD  # the same with another checkout (before a change)
    python benchmarks/scale.py make DIR --only chain_200000 && python benchmarks/scale.py run DIR chain_200000

The cases (the scale part of the reliability issue):

* ``chain_N``: N Relu nodes in a chain on a [1, 16] input (N = 50,000, 100,000, 200,000,
  1,000,000): memory per node and time per node, which must stay flat as N grows; the table's
  last column is the peak RSS above the baseline (the peak RSS of ``python -c "import
  flopcount"``, run the same way) divided by N, in bytes per node (the target: at most 2,000);
* ``sum_100000``: one Sum node with 100,000 inputs (the graph input, 100,000 times): the
  report must not be dominated by drawing the table;
* ``init_500mb``: x [1, 8192] @ W [8192, 16384] (512 MiB of float32 weights) with no output
  shape declared in the file;
* ``external_2_5gib``: five [8192, 16384] weights (2.5 GiB) in an external data file, five
  MatMuls on a [1, 8192] input, declared shapes;
* ``expand_40gb``: an Expand of a [1] input to [10, 1024, 1024, 1024], then a Relu that
  writes those 40 GB of float32: counted (shapes only) and with ``--latency`` (refused before
  running, with the predicted figure);
* ``llama2_7b_latency``: the zoo's llama2_7b with ``--latency`` under ``ulimit -v 6000000``:
  its 25 GiB of weights are refused before they are allocated.

Each run is ``python -m flopcount FILE [args]`` with stdout to /dev/null; the peak is the
child's maximum resident set size (``getrusage``), so the interpreter and numpy (about 60 MB)
are in every figure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20
CHAINS = (50_000, 100_000, 200_000, 1_000_000)


def _onnx():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    return onnx, TensorProto, helper, numpy_helper


def _model(nodes, inputs, outputs, initializers=()):
    onnx, _, helper, _ = _onnx()
    graph = helper.make_graph(nodes, "scale", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def chain(n: int):
    _, TensorProto, helper, _ = _onnx()
    nodes = [helper.make_node("Relu", [f"t{i}" if i else "x"], [f"t{i + 1}" if i + 1 < n else "y"], name=f"n{i}")
             for i in range(n)]
    value = [helper.make_tensor_value_info(v, TensorProto.FLOAT, [1, 16]) for v in ("x", "y")]
    return _model(nodes, value[:1], value[1:])


def wide_sum(n: int):
    _, TensorProto, helper, _ = _onnx()
    nodes = [helper.make_node("Sum", ["x"] * n, ["y"], name="sum")]
    value = [helper.make_tensor_value_info(v, TensorProto.FLOAT, [1, 16]) for v in ("x", "y")]
    return _model(nodes, value[:1], value[1:])


def big_initializer():
    _, TensorProto, helper, numpy_helper = _onnx()
    w = numpy_helper.from_array(np.full((8192, 16384), 0.5, np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="fc")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8192])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])


def write_external(directory: str, count: int = 5) -> str:
    """Five 512 MiB weights in ``external_2_5gib.weights``, written a weight at a time."""
    onnx, TensorProto, helper, _ = _onnx()
    data = os.path.join(directory, "external_2_5gib.weights")
    rows, cols = 8192, 16384
    weights, offset = [], 0
    with open(data, "wb") as f:
        block = np.full((rows, cols), 0.01, np.float32).tobytes()
        for i in range(count):
            f.write(block)
            t = TensorProto(name=f"W{i}", data_type=TensorProto.FLOAT, dims=[rows, cols],
                            data_location=TensorProto.EXTERNAL)
            for key, value in (("location", os.path.basename(data)), ("offset", offset), ("length", len(block))):
                entry = t.external_data.add()
                entry.key, entry.value = key, str(value)
            weights.append(t)
            offset += len(block)
    # each MatMul reads x [1, 8192] and gives [1, 16384]; a Slice brings it back to 8192 columns
    nodes, current = [], "x"
    starts = helper.make_tensor("s", TensorProto.INT64, [1], [0])
    ends = helper.make_tensor("e", TensorProto.INT64, [1], [rows])
    axes = helper.make_tensor("a", TensorProto.INT64, [1], [1])
    for i in range(count):
        nodes.append(helper.make_node("MatMul", [current, f"W{i}"], [f"m{i}"], name=f"fc{i}"))
        last = i == count - 1
        if not last:
            nodes.append(helper.make_node("Slice", [f"m{i}", "s", "e", "a"], [f"h{i}"], name=f"cut{i}"))
        current = f"m{i}" if last else f"h{i}"
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows])],
                   [helper.make_tensor_value_info(current, TensorProto.FLOAT, [1, cols])],
                   weights + [starts, ends, axes])
    path = os.path.join(directory, "external_2_5gib.onnx")
    onnx.save(model, path)
    return path


def expand():
    _, TensorProto, helper, _ = _onnx()
    shape = helper.make_tensor("shape", TensorProto.INT64, [4], [10, 1024, 1024, 1024])
    # the Expand itself is a broadcast view: the Relu after it writes the 40 GB
    nodes = [helper.make_node("Expand", ["x", "shape"], ["big"], name="expand"),
             helper.make_node("Relu", ["big"], ["y"], name="relu")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [10, 1024, 1024, 1024])], [shape])


def make(directory: str, only=None) -> None:
    onnx = _onnx()[0]
    os.makedirs(directory, exist_ok=True)
    builders = {f"chain_{n}": (lambda n=n: chain(n)) for n in CHAINS}
    builders.update(sum_100000=lambda: wide_sum(100_000), init_500mb=big_initializer, expand_40gb=expand)
    for name, build in builders.items():
        if only and name not in only:
            continue
        path = os.path.join(directory, name + ".onnx")
        onnx.save(build(), path)
        print(f"{path}: {os.path.getsize(path) / MIB:.1f} MiB")
    if not only or "external_2_5gib" in only:
        path = write_external(directory)
        print(f"{path}: {os.path.getsize(path) / MIB:.1f} MiB + "
              f"{os.path.getsize(path.replace('.onnx', '.weights')) / MIB:.0f} MiB of external data")


CASES = {f"chain_{n}": ("chain_{n}.onnx".format(n=n), ()) for n in CHAINS}
CASES.update({
    "sum_100000": ("sum_100000.onnx", ()),
    "init_500mb": ("init_500mb.onnx", ()),
    "init_500mb_latency": ("init_500mb.onnx", ("--latency", "--repeat", "1", "--warmup", "0")),
    "external_2_5gib": ("external_2_5gib.onnx", ()),
    "external_2_5gib_latency": ("external_2_5gib.onnx", ("--latency", "--repeat", "1", "--warmup", "0")),
    "expand_40gb": ("expand_40gb.onnx", ()),
    "expand_40gb_latency": ("expand_40gb.onnx", ("--latency",)),
    "llama2_7b_latency": ("llama2_7b", ("--latency",)),
})
LIMITS = {"llama2_7b_latency": 6_000_000 * 1024}  # ulimit -v, in bytes
BASELINE = "baseline"


def run_case(directory: str, name: str, root: str = ROOT) -> dict:
    """One case in a fresh process running the flopcount checkout at ``root``: wall time, the
    child's peak RSS, exit code, last stderr line. ``"baseline"`` is ``import flopcount`` alone."""
    file, args = CASES[name] if name != BASELINE else ("", ())
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    model = os.path.join(os.path.abspath(directory), file) if file.endswith(".onnx") else file
    command = [sys.executable, "-m", "flopcount", model, *args]
    if name == BASELINE:
        command = [sys.executable, "-c", "import flopcount"]
    if name in LIMITS:
        command = ["prlimit", f"--as={LIMITS[name]}", "--"] + command
    script = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
              "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True); "
              "dt = time.perf_counter() - t; "
              "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; "
              "print(dt, peak, p.returncode); print((p.stderr.strip().splitlines() or [''])[-1][:200])")
    # a wrapper process per case, so that RUSAGE_CHILDREN holds this case's child only
    # run from ``root``: ``python -m`` puts the working directory first on sys.path
    done = subprocess.run([sys.executable, "-c", script, *command], env=env, capture_output=True, text=True,
                          cwd=root)
    first, last = (done.stdout.splitlines() + ["", ""])[:2]
    seconds, peak_kib, code = first.split()
    return {"case": name, "seconds": float(seconds), "peak_mib": int(peak_kib) / 1024, "exit": int(code),
            "stderr": last, "command": ("ulimit -v 6000000; " if name in LIMITS else "")
            + ("python -c 'import flopcount'" if name == BASELINE else "flopcount " + " ".join([file, *args]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("make", "run"))
    parser.add_argument("directory")
    parser.add_argument("cases", nargs="*")
    parser.add_argument("--only", nargs="*", help="with make: these files only")
    parser.add_argument("--root", default=ROOT, help="with run: the flopcount checkout to run (default: this one), "
                                                     "for figures before a change")
    args = parser.parse_args()
    if args.action == "make":
        make(args.directory, args.only)
        return
    base = run_case(args.directory, BASELINE, args.root)
    print(f"baseline (`{base['command']}`): peak RSS {base['peak_mib']:.0f} MiB")
    print("| case | command | time (s) | peak RSS (MiB) | bytes per node above the baseline | exit | last line of stderr |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.cases or list(CASES):
        r = run_case(args.directory, name, args.root)
        nodes = int(name.split("_")[1]) if name.startswith("chain_") else None
        per_node = f"{(r['peak_mib'] - base['peak_mib']) * MIB / nodes:.0f}" if nodes else ""
        print(f"| {r['case']} | `{r['command']}` | {r['seconds']:.1f} | {r['peak_mib']:.0f} | {per_node} | {r['exit']} | "
              f"{r['stderr']} |", flush=True)


if __name__ == "__main__":
    main()
