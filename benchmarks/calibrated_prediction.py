"""Predicted against measured latency on this machine's CPU, after `flopcount calibrate`: whole
models and their layers (leaf modules holding at least 2% of the time), at batch 1 and 8,
beside the datasheet-style roofline's error on the same runs.

    python benchmarks/calibrated_prediction.py --engine flopcount   # the zoo's models, flopcount's runtime
    python benchmarks/calibrated_prediction.py --engine torch       # torchvision / transformers models in PyTorch

Issue 31's targets: median absolute error at most 15% on model totals, 30% on those layers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import flopcount
from flopcount.calibrate import calibrate

ZOO = ["resnet18", "resnet34", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
       "efficientnet_b0", "shufflenet_v2_x1_0", "squeezenet1_1", "alexnet", "vgg11", "googlenet", "densenet121",
       "regnet_y_1_6gf", "convnext_tiny", "resnext50_32x4d", "vit_b_16", "bert_base", "distilbert_base", "gpt2"]
TORCHVISION = ["resnet18", "resnet34", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
               "efficientnet_b0", "shufflenet_v2_x1_0", "squeezenet1_1", "alexnet", "vgg11", "googlenet",
               "densenet121", "regnet_y_1_6gf", "convnext_tiny", "resnext50_32x4d", "vit_b_16", "swin_t"]
TRANSFORMERS = ["bert-base-uncased", "gpt2"]


def models(engine: str, batch: int):
    """(label, model, profile() arguments) for each model."""
    if engine == "flopcount":
        for name in ZOO:
            yield name, name, {"batch": batch}
        return
    import torch

    from flopcount.runtime.torch.environment import prepare

    prepare()   # PyPI's CUDA-built torchvision beside a CPU torch: declare its ops first
    import torchvision

    for name in TORCHVISION:
        net = getattr(torchvision.models, name)(weights=None).eval()
        size = 224
        yield name, net, {"args": (torch.randn(batch, 3, size, size),)}
    import transformers

    for name, config in (("bert-base-uncased", transformers.BertConfig()), ("gpt2", transformers.GPT2Config())):
        cls = transformers.BertModel if name.startswith("bert") else transformers.GPT2Model
        net = cls(config).eval()
        yield name, net, {"args": (torch.randint(0, 1000, (batch, 128)),)}


def leaves(report) -> list:
    """The innermost layers: module (or scope) rows with no module rows inside them."""
    inner = {r.parent for r in report.rows if r.kind != "op"}
    return [r for r in report.rows if r.kind != "op" and r.name and r.name not in inner]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", choices=["flopcount", "torch"], default="flopcount")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batches", default="1,8")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    start = time.time()
    profile = calibrate(engine=args.engine)
    print(f"calibrated in {time.time() - start:.0f} s", flush=True)
    print("| model | batch | measured | predicted | error | roofline error | layers (>=2%) | median layer error |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    totals, roofs, layer_errors = [], [], []
    for batch in (int(b) for b in args.batches.split(",")):
        for label, model, extra in models(args.engine, batch):
            inputs = extra.pop("args", ())
            report = flopcount.profile(model, *inputs, latency=True, repeat=args.repeat, warmup=1, hardware=profile,
                                       engine=args.engine, **extra)
            t = report.totals
            error = t["predicted_ms"] / t["latency_ms"] - 1
            roof = t["roofline_ms"] / t["latency_ms"] - 1
            big = [r for r in leaves(report) if r.latency_ms and r.latency_ms >= 0.02 * t["latency_ms"]
                   and r.predicted_ms is not None]
            errors = [abs(r.predicted_ms / r.latency_ms - 1) for r in big]
            totals.append(abs(error))
            roofs.append(abs(roof))
            layer_errors += errors
            median = f"{statistics.median(errors):.1%}" if errors else "-"
            print(f"| {label} | {batch} | {t['latency_ms']:.2f} ms | {t['predicted_ms']:.2f} ms | {error:+.1%} | "
                  f"{roof:+.1%} | {len(big)} | {median} |", flush=True)
    print(f"\nmedian |error| of model totals: {statistics.median(totals):.1%} (roofline: {statistics.median(roofs):.1%}) "
          f"over {len(totals)} runs; of layers with >= 2% of the time: {statistics.median(layer_errors):.1%} "
          f"over {len(layer_errors)} layers")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
