"""``--engine onnxruntime`` on ResNet-50: do the per-node times onnxruntime's profiler reports,
joined with flopcount's counts, add up to onnxruntime's own total? The target: the nodes' sum
within 10 % of the profiled run's ``model_run`` (onnxruntime's total for that run), and every
FLOP of the file joined to one of onnxruntime's nodes.

    python benchmarks/onnxruntime_engine.py [--repeat 11] [--batch 1] [--threads 2]

Exports flopcount's resnet50 (torchvision's weights layout) to ONNX in a temporary folder, then
prints one table with the machine's load average at start and end (cpu_common's header).
"""

from __future__ import annotations

import argparse
import os
import tempfile

import cpu_common  # noqa: F401  (two threads, before numpy loads)
from cpu_common import Row, report

import flopcount
import flopcount.runtime as rt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime's intra-op threads")
    args = parser.parse_args()
    import onnx
    import onnxruntime

    from flopcount import models

    from flopcount.engines import onnxruntime_engine

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "resnet50.onnx")
        x = rt.randn(args.batch, 3, 224, 224)
        rt.onnx.export(models.get("resnet50").eval(), path, x)
        counted = flopcount.profile(path, x)
        # what profile(path, x, engine="onnxruntime") does, in its two steps: onnxruntime's own
        # total for the profiled run is needed beside the report
        times = onnxruntime_engine.time_file(path, {"x": x.numpy()}, threads=args.threads, warmup=2,
                                             repeat=args.repeat)
        onnxruntime_engine.join(counted, times, onnx.load(path))
    nodes = counted.engine_nodes
    in_nodes = sum(n.latency_ms for n in nodes)
    joined = sum(n.flops for n in nodes)
    report(f"--engine onnxruntime: resnet50 batch {args.batch}, {args.repeat} runs, {args.threads} thread(s)",
           f"onnxruntime {onnxruntime.__version__}",
           "onnxruntime's total", [
               Row("sum of onnxruntime's node times, median profiled run", in_nodes, times.profiled_ms,
                   limit=0.10, agree=True),
               Row("whole run without the profiler (median)", counted.latency_ms, times.profiled_ms,
                   note="ratio: profiler overhead"),
               Row("FLOPs joined to onnxruntime's nodes / the file's", joined, counted.flops, unit="FLOP",
                   limit=0.0, agree=True),
           ], extra=f"{len(nodes)} onnxruntime nodes, {sum(not n.joined for n in nodes)} joined to no file node")


if __name__ == "__main__":
    main()
