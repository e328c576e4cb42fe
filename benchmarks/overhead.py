"""What profiling costs on top of the work itself, in one run.

    PYTHONPATH=/path/to/torchvision python benchmarks/overhead.py [--repeat N]

* eager view: ``flopcount.profile(resnet50, x, mode="eager")`` (every module call and op
  recorded in one counting run, then priced) against a plain ``model(x)`` under ``no_grad``,
  batch 1: ratio <= 1.10, as the median of per-pair ratios (the overhead is a few percent, the
  machine's drift between pairs as much);
* graph view: ``flopcount.profile(resnet50, x, mode="graph")`` (trace + parse, no latency):
  under 200 ms; PyTorch's ``FlopCounterMode`` around torchvision's resnet50 on its meta device
  is shown beside it for reference;
* ONNX: ``rt.onnx.load(path)`` (read, check, convert) and ``flopcount.profile(graph)`` of a
  resnet50 file with its weights (exported by PyTorch's TorchScript exporter, or flopcount's
  own when torch is missing) against ``onnx.load(path)`` of the same file: ratio <= 1.5;
* ONNX without ``wire.py``: the same ``rt.onnx.load`` + profile against itself with
  ``wire.split_weights`` off (protobuf then parses the whole file and every weight is copied out
  of it): the gain that keeps the hand-written wire reader (ARCHITECTURE.md), reported with no
  target.

Calls alternate between the two sides; medians over the repeats.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from cpu_common import Row, check_close, interleaved, median_ms, paired_ratio, report

EAGER_LIMIT, GRAPH_LIMIT_MS, ONNX_LIMIT = 1.10, 200, 1.5


def eager_row(model, x, repeat: int) -> Row:
    import flopcount
    import flopcount.runtime as rt

    def plain():
        with rt.no_grad():
            return model(x)

    def profiled():
        return flopcount.profile(model, x, mode="eager")

    a, b = interleaved(profiled, plain, repeat)
    ours, peer = median_ms(a), median_ms(b)
    return Row("resnet50 batch 1: profile(mode='eager')", ours, peer, EAGER_LIMIT, paired=paired_ratio(a, b),
               note=f"peer column: a plain forward; ratio: median of per-pair ratios (of the medians: "
                    f"{ours / peer:.2f})")


def graph_row(model, x, repeat: int) -> Row:
    import flopcount

    def counted():
        return flopcount.profile(model, x, mode="graph")

    theirs = _torch_meta_count()
    if theirs is None:
        samples = interleaved(counted, lambda: None, repeat)[0]
        peer = None
    else:
        samples, peer_samples = interleaved(counted, theirs, repeat)
        peer = median_ms(peer_samples)
    return Row("resnet50 batch 1: profile(mode='graph'), no latency", median_ms(samples), peer, GRAPH_LIMIT_MS,
               absolute=True, note="peer column: FlopCounterMode on meta, for reference")


def _torch_meta_count():
    try:
        import torch
        import torchvision
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None
    with torch.device("meta"):
        model = torchvision.models.resnet50().eval()
    x = torch.empty(1, 3, 224, 224, device="meta")

    def count():
        with FlopCounterMode(display=False) as counter:
            model(x)
        return counter.get_total_flops()

    return count


def export_resnet50(model, x, path: str) -> str:
    """Write resnet50 with ``model``'s weights to ``path``; returns which exporter wrote it."""
    import warnings

    try:
        import torch
        import torchvision
    except ImportError:
        import flopcount.runtime as rt

        rt.onnx.export(model, path, x)
        return "flopcount's exporter"
    reference = torchvision.models.resnet50().eval()
    reference.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in model.state_dict().items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(reference, (torch.from_numpy(x.numpy()),), path, dynamo=False,
                          input_names=["input"], output_names=["logits"])
    return "PyTorch's TorchScript exporter"


def onnx_row(model, x, repeat: int, folder: str) -> Row:
    import onnx

    import flopcount
    import flopcount.runtime as rt

    path = os.path.join(folder, "resnet50.onnx")
    exporter = export_resnet50(model, x, path)
    graph = rt.GraphModule(rt.onnx.load(path))
    with rt.no_grad():
        check_close("resnet50 ONNX import", graph(x).numpy(), model(x).numpy())

    def ours():
        return flopcount.profile(rt.onnx.load(path))

    def theirs():
        return onnx.load(path)

    a, b = interleaved(ours, theirs, repeat)
    size_mb = os.path.getsize(path) / 2**20
    return Row(f"resnet50 ONNX file ({size_mb:.0f} MB): rt.onnx.load + profile", median_ms(a), median_ms(b),
               ONNX_LIMIT, note=f"peer column: onnx.load; file written by {exporter}")


def onnx_wire_row(path: str, repeat: int) -> Row:
    import flopcount
    import flopcount.runtime as rt
    from flopcount.runtime.onnx import wire

    split = wire.split_weights

    def with_wire():
        return flopcount.profile(rt.onnx.load(path))

    def without_wire():
        wire.split_weights = lambda data, types: None  # the importer then parses the whole file
        try:
            return flopcount.profile(rt.onnx.load(path))
        finally:
            wire.split_weights = split

    a, b = interleaved(with_wire, without_wire, repeat)
    return Row("the same, wire.py on (peer column: wire.py off)", median_ms(a), median_ms(b),
               note="the onnx package parses the whole file; weights copied out of protobuf",
               paired=paired_ratio(a, b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=31, help="timed calls per side")
    args = parser.parse_args()
    import onnx

    import flopcount.runtime as rt
    from flopcount import models

    rt.manual_seed(0)
    model = models.get("resnet50").eval()
    x = models.example_input("resnet50")
    rows = [eager_row(model, x, args.repeat), graph_row(model, x, args.repeat)]
    with tempfile.TemporaryDirectory() as folder:
        rows.append(onnx_row(model, x, args.repeat, folder))
        rows.append(onnx_wire_row(os.path.join(folder, "resnet50.onnx"), args.repeat))
    peer = f"onnx {onnx.__version__}"
    try:
        import torch

        peer += f", torch {torch.__version__}"
    except ImportError:
        pass
    report("Profiling overhead", peer, "peer", rows,
           extra=f"medians of {args.repeat} interleaved calls per side, after one warm-up call each")


if __name__ == "__main__":
    main()
