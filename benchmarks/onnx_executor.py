"""flopcount's own executor against onnxruntime on the same exported ONNX files, one thread each.

    python benchmarks/onnx_executor.py [--repeat 9] [--models resnet18,gpt2,...] [--cache DIR]

The files are exported once by PyTorch (torchvision, timm and Hugging Face models at their real
sizes, random weights) into --cache. Each file is loaded by ``flopcount.runtime.onnx.load`` and
by an onnxruntime session (one intra-op thread, sequential execution); both run the same inputs,
their outputs are checked to agree, then timed interleaved. The table gives medians and the
median of the paired ratios (flopcount / onnxruntime): the issue's target is a median at most
1.2x and no model above 2x. ``--by-op`` adds, per model, the share of flopcount's time each
runtime op takes (timed node by node; convolutions split into depthwise, 1x1 and larger
kernels), which points at the kernels to speed up.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

os.environ["BENCH_THREADS"] = "1"  # one thread each, as the issue measures
from cpu_common import Row, check_close, interleaved, median_ms, paired_ratio, report  # noqa: E402

import numpy as np  # noqa: E402

TORCHVISION = ("resnet18", "resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "vit_b_16")
TIMM = ("fastvit_t8", "ghostnet_100")
HF = ("gpt2", "bert", "phi3")
DEFAULT = TORCHVISION + TIMM + HF


def _torch():
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
    import torch_env  # the registry's torchvision needs its ops declared next to a CPU torch

    torch_env.prepare()
    import torch

    torch.set_num_threads(1)
    torch.backends.mha.set_fastpath_enabled(False)  # ViT's fused attention has no ONNX export
    return torch


def _hf_model(name: str):
    import transformers as tf

    if name == "gpt2":
        return tf.GPT2LMHeadModel(tf.GPT2Config()), 128
    if name == "bert":
        return tf.BertModel(tf.BertConfig()), 128
    if name == "phi3":  # Phi-3's layout at a quarter of its width and depth: the same ops
        config = tf.Phi3Config(hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
                               num_attention_heads=12, num_key_value_heads=12, vocab_size=32064)
        return tf.Phi3ForCausalLM(config), 128
    raise ValueError(f"unknown Hugging Face model {name!r}")


def export(name: str, folder: pathlib.Path) -> tuple[pathlib.Path, dict]:
    """The model's ONNX file (exported once) and an input for it."""
    path = folder / f"{name}.onnx"
    torch = _torch()
    if name in HF:
        model, length = _hf_model(name)
        ids = torch.randint(0, 1000, (1, length))
        example, feeds = (ids,), {"input_ids": ids.numpy()}

        class Logits(torch.nn.Module):  # one tensor out, no cache
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, input_ids):
                out = self.inner(input_ids=input_ids, use_cache=False) if name != "bert" else self.inner(input_ids)
                return out[0]

        model = Logits(model)
    else:
        if name in TIMM:
            import timm

            model = timm.create_model(name, pretrained=False)
        else:
            import torchvision

            model = torchvision.models.get_model(name)
        x = torch.randn(1, 3, 224, 224)
        example, feeds = (x,), {"x": x.numpy()}
    model.eval()
    if not path.exists():
        names = list(feeds)
        with torch.no_grad():
            # transformers' masks use aten ops the TorchScript exporter lacks: those go through dynamo
            torch.onnx.export(model, example, str(path), input_names=names, output_names=["y"],
                              opset_version=18 if name in HF else 17, dynamo=name in HF, external_data=False)
    return path, feeds


def _ort_session(path: pathlib.Path, profile: bool = False):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.enable_profiling = profile
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _op_label(node, inputs) -> str:
    """The runtime op's name; convolutions split by kind, as they run different kernels."""
    op = getattr(node.op, "__name__", str(node.op))
    if op == "Conv" and len(inputs) > 1:
        weight = inputs[1].shape
        if node.attrs.get("groups", 1) > 1 and weight[1] == 1:
            return "Conv(depthwise)"
        return "Conv(1x1)" if all(k == 1 for k in weight[2:]) else "Conv(kxk)"
    return op


def _by_op(graph, inputs, runs: int = 5) -> list[tuple[str, float]]:
    """Seconds each runtime op takes in a run (summed by op; the median over ``runs`` runs, as
    one run on a shared machine can be preempted in any op), largest first."""
    per_run = [_one_run_by_op(graph, inputs) for _ in range(runs)]
    median = {op: statistics.median(run.get(op, 0.0) for run in per_run) for op in per_run[0]}
    return sorted(median.items(), key=lambda kv: -kv[1])


def _one_run_by_op(graph, inputs) -> dict:
    spent: dict = {}
    started: dict = {}

    def before(node, node_inputs):
        started["op"] = _op_label(node, node_inputs)
        started["t"] = time.perf_counter()

    def after(node, _outputs):
        op = started["op"]
        spent[op] = spent.get(op, 0.0) + time.perf_counter() - started["t"]

    graph.run(*inputs, before=before, after=after)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--models", default=",".join(DEFAULT))
    parser.add_argument("--cache", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "flopcount-onnx-bench"))
    parser.add_argument("--by-op", action="store_true", help="also each runtime op's share of flopcount's time")
    args = parser.parse_args()
    folder = pathlib.Path(args.cache)
    folder.mkdir(parents=True, exist_ok=True)

    import flopcount.runtime as rt

    rows, shares = [], []
    for name in args.models.split(","):
        path, feeds = export(name, folder)
        graph = rt.GraphModule(rt.onnx.load(str(path), input_shapes={k: v.shape for k, v in feeds.items()}))
        inputs = [rt.from_numpy(v) for v in feeds.values()]
        session = _ort_session(path)
        with rt.no_grad():
            ours = np.asarray(graph(*inputs).numpy())
            theirs = session.run(None, feeds)[0]
            check_close(name, ours, theirs, tolerance=1e-3)
            a, b = interleaved(lambda: graph(*inputs), lambda: session.run(None, feeds), args.repeat)
            if args.by_op:
                shares.append((name, _by_op(graph, inputs)))
        rows.append(Row(name, median_ms(a), median_ms(b), limit=2.0, paired=paired_ratio(a, b)))
    ratios = [r.ratio for r in rows]
    report("flopcount's executor vs onnxruntime on exported ONNX files (1 thread each)",
           f"onnxruntime {__import__('onnxruntime').__version__}", "onnxruntime", rows,
           extra=f"median ratio {statistics.median(ratios):.2f} (target <= 1.2), largest {max(ratios):.2f} "
                 f"(target <= 2)")
    for name, spent in shares:
        total = sum(t for _, t in spent)
        top = ", ".join(f"{op} {100 * t / total:.0f}%" for op, t in spent[:6])
        print(f"* {name}: {top}")


if __name__ == "__main__":
    main()
