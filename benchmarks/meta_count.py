"""Counting without data: a GPT-3-175B-shaped decoder built on the meta device and counted,
flopcount against PyTorch's ``FlopCounterMode`` on its meta device, in one run.

    python benchmarks/meta_count.py [--rounds N]

The model: GPT-2's architecture at GPT-3 175B's shape (96 layers, d_model 12288, 96 heads,
2048 tokens, GPT-2's 50257-token vocabulary, LM head tied to the embedding), eager attention
(two matmuls and a mask) on both sides: flopcount's zoo ``gpt2`` and transformers'
``GPT2LMHeadModel``. Each side runs in its own subprocess, one after the other, alternating
which goes first, ``--rounds`` times: it imports, builds the model on meta, counts a forward
pass (flopcount: ``profile(model, ids)``, the graph view; PyTorch: ``FlopCounterMode`` around
``model(ids)``), then a forward + backward pass (``profile(..., backward=True)``; PyTorch:
``model(ids).logits.sum().backward()`` under the counter). Peak RSS is each child's own
``ru_maxrss`` (``os.wait4``).

Targets: build + both counts at least 2x faster (ratio <= 0.5); peak RSS at most half; GEMM-class
FLOPs within 0.1 % of PyTorch's (PyTorch counts 2 per MAC of GEMM-class ops and nothing else, so
flopcount's figure here is 2 x its MACs); flopcount's other FLOPs (elementwise, softmax, norms)
are listed as the rows PyTorch does not have. Scaling: flopcount's counting time at 12, 24, 48
and 96 layers against the 12-layer time scaled linearly.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from cpu_common import Row, report

SHAPE = dict(n_embd=12288, n_head=96, n_positions=2048)
TOKENS = 2048
SCALING = (12, 24, 48, 96)


def child_flopcount(layers: int) -> dict:
    start = time.perf_counter()
    import flopcount
    import flopcount.runtime as rt
    from flopcount import models

    imported = time.perf_counter()
    with rt.meta():
        model = models.get("gpt2", n_layer=layers, **SHAPE)
    ids = rt.zeros(1, TOKENS, dtype=rt.int64, device="meta")
    built = time.perf_counter()
    forward = flopcount.profile(model, ids)
    counted = time.perf_counter()
    training = flopcount.profile(model, ids, backward=True)
    done = time.perf_counter()
    totals = training.totals
    return dict(import_s=imported - start, build_s=built - imported, forward_s=counted - built,
                training_s=done - counted, gemm_forward=2 * forward.macs,
                gemm_training=2 * totals["training_macs"],
                other_forward=forward.flops - 2 * forward.macs,
                other_training=totals["training_flops"] - 2 * totals["training_macs"])


def child_torch(layers: int) -> dict:
    start = time.perf_counter()
    import torch
    import transformers
    from torch.utils.flop_counter import FlopCounterMode

    imported = time.perf_counter()
    config = transformers.GPT2Config(n_layer=layers, attn_implementation="eager", **SHAPE)
    with torch.device("meta"):
        model = transformers.GPT2LMHeadModel(config)
    ids = torch.zeros(1, TOKENS, dtype=torch.long, device="meta")
    built = time.perf_counter()
    with FlopCounterMode(display=False) as counter:
        model(ids)
    forward = counter.get_total_flops()
    counted = time.perf_counter()
    with FlopCounterMode(display=False) as counter:
        model(ids).logits.sum().backward()
    training = counter.get_total_flops()
    done = time.perf_counter()
    return dict(import_s=imported - start, build_s=built - imported, forward_s=counted - built,
                training_s=done - counted, gemm_forward=forward, gemm_training=training)


def run_child(side: str, layers: int) -> dict:
    """Run one side in a fresh interpreter; its figures plus its own peak RSS in MB."""
    proc = subprocess.Popen([sys.executable, __file__, "--child", side, "--layers", str(layers)],
                            stdout=subprocess.PIPE, env=os.environ.copy())
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"the {side} child ({layers} layers) failed with exit code {proc.returncode}")
    result = json.loads(out)
    result["rss_mb"] = usage.ru_maxrss / 1024  # Linux reports kilobytes
    return result


def median(runs: list, key: str) -> float:
    return statistics.median(r[key] for r in runs)


def work_s(r: dict) -> float:
    return r["build_s"] + r["forward_s"] + r["training_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="subprocesses per side")
    parser.add_argument("--child", choices=("flopcount", "torch"), help=argparse.SUPPRESS)
    parser.add_argument("--layers", type=int, default=96, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        fn = child_flopcount if args.child == "flopcount" else child_torch
        print(json.dumps(fn(args.layers)))
        return

    ours, theirs = [], []
    for i in range(args.rounds):
        order = [("flopcount", ours), ("torch", theirs)]
        for side, runs in (order if i % 2 == 0 else order[::-1]):
            runs.append(run_child(side, 96))
    scaling = {96: ours}
    for layers in SCALING[:-1]:
        scaling[layers] = [run_child("flopcount", layers) for _ in range(args.rounds)]

    for key in ("gemm_forward", "gemm_training"):  # counts are deterministic: every run agrees
        if len({r[key] for r in ours}) != 1 or len({r[key] for r in theirs}) != 1:
            sys.exit(f"{key} differs between runs of one side")
    ms = 1e3
    rows = [
        Row("GPT-3 175B shape: build + count forward + count fwd+bwd",
            ms * statistics.median(map(work_s, ours)), ms * statistics.median(map(work_s, theirs)), 0.5),
        Row("  build on meta", ms * median(ours, "build_s"), ms * median(theirs, "build_s")),
        Row("  count forward", ms * median(ours, "forward_s"), ms * median(theirs, "forward_s")),
        Row("  count forward + backward", ms * median(ours, "training_s"), ms * median(theirs, "training_s")),
        Row("  import (not in the total)", ms * median(ours, "import_s"), ms * median(theirs, "import_s")),
        Row("peak RSS of the process", median(ours, "rss_mb"), median(theirs, "rss_mb"), 0.5, unit="MB"),
        Row("GEMM-class FLOPs, forward", ours[0]["gemm_forward"], theirs[0]["gemm_forward"], 0.001,
            unit="FLOP", agree=True, note="flopcount: 2 x MACs"),
        Row("GEMM-class FLOPs, forward + backward", ours[0]["gemm_training"], theirs[0]["gemm_training"], 0.001,
            unit="FLOP", agree=True, note="flopcount: 2 x MACs"),
        Row("other FLOPs, forward (rows PyTorch does not count)", ours[0]["other_forward"], None, unit="FLOP"),
        Row("other FLOPs, forward + backward", ours[0]["other_training"], None, unit="FLOP"),
    ]
    first = SCALING[0]
    per_layer = statistics.median(map(work_s, scaling[first])) / first
    for layers in SCALING:
        measured = ms * statistics.median(map(work_s, scaling[layers]))
        rows.append(Row(f"scaling: build + counts, {layers} layers", measured, ms * per_layer * layers, 1.25,
                        note=f"peer column: flopcount's {first}-layer time x {layers}/{first}"))
    import torch
    import transformers

    report("Counting on meta: flopcount vs PyTorch FlopCounterMode", f"torch {torch.__version__}, "
           f"transformers {transformers.__version__}", "PyTorch", rows,
           extra=f"medians of {args.rounds} subprocesses per side, alternating which side runs first")


if __name__ == "__main__":
    main()
