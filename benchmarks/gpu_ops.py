"""flopcount's CUDA kernels against PyTorch (cuBLAS/cuDNN) on the same shapes, in one run.

    python benchmarks/gpu_ops.py [--dtype float16]

Each case runs through flopcount's dispatcher (what a model pays, Python overhead included)
and through torch.nn.functional, both in the chosen dtype (float32 without TF32 by default),
under no_grad. The table shows the
median of CUDA-event-timed runs, flopcount / torch, and flopcount's achieved TFLOP/s (FLOPs
from flopcount's cost rules) against a large CuPy matmul measured in the same run.
"""

from __future__ import annotations

import numpy as np

from gpu_common import flops_of, matmul_tflops, parse_dtype, print_table, require, time_flopcount, time_torch


def cases(rt, torch, dtype: str = "float32", device: str = "cuda"):
    """(name, flopcount call, torch call) with inputs already on ``device``, in ``dtype``."""
    F, TF = rt.nn.functional, torch.nn.functional
    rng = np.random.default_rng(0)

    def pair(*shape):  # the same float32 values, cast to dtype on each side
        a = rng.standard_normal(shape).astype(np.float32)
        return (rt.tensor(a, device=device).to(getattr(rt, dtype)),
                torch.tensor(a, device=device).to(getattr(torch, dtype)))

    out = []

    def case(name, ours, theirs):
        out.append((name, ours, theirs))

    a, ta = pair(4096, 4096)
    case("matmul 4096x4096 @ 4096x4096", lambda: a @ a, lambda: ta @ ta)
    q, tq = pair(8, 12, 1024, 64)
    k, tk = pair(8, 12, 1024, 64)
    v, tv = pair(8, 12, 1024, 64)
    case("bmm (96, 1024, 64) @ (96, 64, 1024)", lambda: q @ k.mT, lambda: tq @ tk.mT)
    x, tx = pair(32 * 128, 768)
    w, tw = pair(3072, 768)
    b, tb = pair(3072)
    case("linear (4096, 768) -> 3072 + bias", lambda: F.linear(x, w, b), lambda: TF.linear(tx, tw, tb))
    # the same linear and a ReLU as a graph run that nothing watches: one cuBLASLt matmul whose
    # epilogue adds the bias and applies the ReLU (graph/plain_run.py), the two ops otherwise
    mlp = rt.nn.Sequential(rt.nn.Linear(768, 3072), rt.nn.ReLU())
    mlp[0].weight, mlp[0].bias = rt.nn.Parameter(w), rt.nn.Parameter(b)
    fused = rt.GraphModule(rt.trace(mlp, x))
    case("linear + bias + relu, graph (4096, 768)", lambda: fused(x), lambda: TF.relu(TF.linear(tx, tw, tb)))

    img, timg = pair(32, 64, 56, 56)
    w3, tw3 = pair(64, 64, 3, 3)
    case("conv2d 3x3 (32, 64, 56, 56) -> 64", lambda: F.conv2d(img, w3, padding=1), lambda: TF.conv2d(timg, tw3, padding=1))
    w1, tw1 = pair(256, 64, 1, 1)
    case("conv2d 1x1 (32, 64, 56, 56) -> 256", lambda: F.conv2d(img, w1), lambda: TF.conv2d(timg, tw1))
    stem, tstem = pair(32, 3, 224, 224)
    w7, tw7 = pair(64, 3, 7, 7)
    case("conv2d 7x7/2 stem (32, 3, 224, 224)", lambda: F.conv2d(stem, w7, stride=2, padding=3),
         lambda: TF.conv2d(tstem, tw7, stride=2, padding=3))
    wg, twg = pair(64, 2, 3, 3)
    case("conv2d 3x3 groups=32 (32, 64, 56, 56)", lambda: F.conv2d(img, wg, padding=1, groups=32),
         lambda: TF.conv2d(timg, twg, padding=1, groups=32))
    dw, tdw = pair(64, 1, 3, 3)
    case("depthwise 3x3 (32, 64, 56, 56)", lambda: F.conv2d(img, dw, padding=1, groups=64),
         lambda: TF.conv2d(timg, tdw, padding=1, groups=64))
    wt, twt = pair(64, 32, 4, 4)
    case("conv_transpose2d 4x4/2 (32, 64, 56, 56)", lambda: F.conv_transpose2d(img, wt, stride=2, padding=1),
         lambda: TF.conv_transpose2d(timg, twt, stride=2, padding=1))
    pool, tpool = pair(32, 64, 112, 112)
    case("max_pool2d 3x3/2 (32, 64, 112, 112)", lambda: F.max_pool2d(pool, 3, 2, 1), lambda: TF.max_pool2d(tpool, 3, 2, 1))
    s, ts = pair(8 * 12 * 128, 1024)
    case("softmax rows (12288, 1024)", lambda: F.softmax(s, -1), lambda: TF.softmax(ts, -1))
    h, th = pair(32 * 197, 768)
    g, tg = pair(768)
    case("layer_norm (6304, 768)", lambda: F.layer_norm(h, (768,), g, g), lambda: TF.layer_norm(th, (768,), tg, tg))
    r, tr = pair(8 * 512, 4096)
    rw, trw = pair(4096)
    if hasattr(TF, "rms_norm"):
        case("rms_norm (4096, 4096)", lambda: F.rms_norm(r, (4096,), rw, 1e-6), lambda: TF.rms_norm(tr, (4096,), trw, 1e-6))
    act, tact = pair(32 * 197, 3072)
    case("gelu (6304, 3072)", lambda: F.gelu(act), lambda: TF.gelu(tact))
    case("silu (6304, 3072)", lambda: F.silu(act), lambda: TF.silu(tact))
    case("sdpa (8, 12, 1024, 64)", lambda: F.scaled_dot_product_attention(q, k, v),
         lambda: TF.scaled_dot_product_attention(tq, tk, tv))
    case("sdpa causal (8, 12, 1024, 64)", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         lambda: TF.scaled_dot_product_attention(tq, tk, tv, is_causal=True))
    return out


def main() -> None:
    dtype = parse_dtype(__doc__.splitlines()[0])
    rt, torch = require()
    peak = matmul_tflops(dtype=dtype)
    rows = []
    with rt.no_grad(), torch.no_grad():
        for name, ours, theirs in cases(rt, torch, dtype):
            flops = flops_of(ours)
            rows.append((name, time_flopcount(ours), time_torch(theirs), flops))
    print_table("flopcount CUDA kernels vs PyTorch", rows, peak, dtype)


if __name__ == "__main__":
    main()
