"""flopcount's convolution kernels against onnxruntime's on single conv layers, one thread each.

    python benchmarks/conv_layers.py [--repeat 15] [--layers dw,stem,strided]

Each layer (shapes from the exported files of ``onnx_executor.py``: MobileNetV3, EfficientNet,
ConvNeXt and ResNet depthwise convs, network stems, ResNet's strided 3x3 convs) is one ONNX
``Conv`` node made with ``onnx.helper``, its weight an initializer; onnxruntime runs the file,
flopcount runs ``rt.nn.functional.conv2d`` on the same arrays with the weight read-only, as a
loaded model's is. Outputs are checked to agree, then both are timed interleaved; the ratio is
the median of the paired ratios (flopcount / onnxruntime). There is no target: the table shows
which kernels are behind the runtime people deploy on, layer by layer.
"""

from __future__ import annotations

import argparse
import os

os.environ["BENCH_THREADS"] = "1"  # one thread each
from cpu_common import Row, check_close, interleaved, median_ms, paired_ratio, report  # noqa: E402

import numpy as np  # noqa: E402

# (in channels, out channels, map size, kernel, stride, groups): groups == in channels is depthwise
LAYERS = {
    "dw": [(384, 384, 14, 7, 1, 384), (96, 96, 56, 7, 1, 96), (192, 192, 28, 7, 1, 192), (768, 768, 7, 7, 1, 768),
           (960, 960, 7, 5, 1, 960), (672, 672, 14, 5, 1, 672), (480, 480, 14, 3, 1, 480),
           (240, 240, 28, 5, 1, 240), (144, 144, 56, 3, 2, 144), (64, 64, 112, 3, 2, 64)],
    "stem": [(3, 64, 224, 7, 2, 1), (3, 32, 224, 3, 2, 1), (3, 16, 224, 3, 2, 1), (3, 96, 224, 4, 4, 1)],
    "strided": [(64, 128, 56, 3, 2, 1), (128, 256, 28, 3, 2, 1), (256, 512, 14, 3, 2, 1)],
}


def _onnx_conv(x_shape, w, stride: int, pad: int, groups: int) -> bytes:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    out_size = (x_shape[2] + 2 * pad - w.shape[2]) // stride + 1
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[stride] * 2, pads=[pad] * 4, group=groups)
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, w.shape[0], out_size, out_size])],
        initializer=[numpy_helper.from_array(w, "w")])
    return onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--layers", default=",".join(LAYERS))
    args = parser.parse_args()

    import onnxruntime as ort

    import flopcount.runtime as rt

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    rng = np.random.default_rng(0)
    rows = []
    for kind in args.layers.split(","):
        for cin, cout, size, k, stride, groups in LAYERS[kind]:
            pad = k // 2 if k % 2 else 0
            x = rng.standard_normal((1, cin, size, size)).astype(np.float32)
            w = rng.standard_normal((cout, cin // groups, k, k)).astype(np.float32)
            session = ort.InferenceSession(_onnx_conv(x.shape, w, stride, pad, groups), options,
                                           providers=["CPUExecutionProvider"])
            w.flags.writeable = False  # as a loaded model's weights are
            xt, wt = rt.from_numpy(x), rt.from_numpy(w)

            def ours():
                return rt.nn.functional.conv2d(xt, wt, None, stride, pad, 1, groups)

            name = f"{kind} {cin}->{cout} {size}x{size} k{k} s{stride}"
            with rt.no_grad():
                check_close(name, ours().numpy(), session.run(None, {"x": x})[0], tolerance=1e-4)
                a, b = interleaved(ours, lambda: session.run(None, {"x": x}), args.repeat)
            rows.append(Row(name, median_ms(a), median_ms(b), paired=paired_ratio(a, b)))
    report("flopcount's conv kernels vs onnxruntime's on single layers (1 thread each)",
           f"onnxruntime {ort.__version__}", "onnxruntime", rows)


if __name__ == "__main__":
    main()
