"""Calibrated profiles: time predicted from measurements, not from the datasheet alone.

``flopcount calibrate`` times ops of every class (GEMMs, convolutions, attention, elementwise,
norms, reductions, pooling) at several sizes on one engine, and keeps, per class, each op's
measured time against its roofline time on the base profile. A prediction for any op is that
curve read at the op's own roofline time, interpolated in log-log: small ops take what the
smallest measured ones took (launch and dispatch overhead), large ops the efficiency the
largest reached. The profile is saved as JSON in the user's cache folder and named by
``--hardware`` like a shipped one (or given as a path).

    >>> curve = ((1e-6, 2e-5), (1e-3, 2e-3))
    >>> round(read_curve(curve, 1e-9), 9), round(read_curve(curve, 1e-4), 6), round(read_curve(curve, 1e-2), 6)
    (2e-05, 0.000431, 0.02)
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from ..runtime.errors import FlopcountError
from .profile import Profile

# op types (as the counters name them) by class; anything else is "elementwise"
CLASSES = {
    "matmul": ("linear", "matmul", "bmm", "mm", "addmm", "baddbmm", "einsum", "gemm", "quantized_linear",
               "MatMul", "Gemm", "grouped_mm"),
    "conv": ("conv", "conv1d", "conv2d", "conv3d", "conv_transpose", "conv_transpose2d", "convolution", "Conv",
             "ConvTranspose"),
    "attention": ("scaled_dot_product_attention", "attention", "multi_head_attention"),
    "norm": ("layer_norm", "batch_norm", "group_norm", "rms_norm", "instance_norm", "LayerNormalization",
             "BatchNormalization"),
    "reduction": ("softmax", "log_softmax", "sum", "mean", "max", "min", "amax", "var", "std", "cumsum",
                  "Softmax", "ReduceMean", "ReduceSum"),
    "pool": ("max_pool", "avg_pool", "adaptive_avg_pool", "adaptive_max_pool", "max_pool2d", "avg_pool2d",
             "adaptive_avg_pool2d", "adaptive_max_pool2d", "MaxPool",
             "AveragePool", "GlobalAveragePool", "GlobalMaxPool"),
}
_BATCH_NORMS = ("batch_norm", "BatchNormalization")
# an adaptive pool (in the zoo, nearly always to one value per channel: classifier heads and
# squeeze-and-excitation blocks) is a mean or max over the plane, which PyTorch computes as that
# reduction: read on the windowed max-pool curve, PyTorch's were predicted 13-22 times too slow
_GLOBAL_POOLS = ("adaptive_avg_pool", "adaptive_max_pool", "adaptive_avg_pool2d", "adaptive_max_pool2d",
                 "GlobalAveragePool", "GlobalMaxPool")
# elementwise ops that evaluate a transcendental function (an exponential, erf, a root) per
# element: compute a copy's bandwidth does not cover, so they get a curve of their own
MATH = ("gelu", "silu", "swish", "sigmoid", "logsigmoid", "tanh", "exp", "expm1", "log", "log1p", "erf", "softplus",
        "mish", "elu", "selu", "pow", "sqrt", "rsqrt", "sin", "cos", "Gelu", "Erf", "Sigmoid", "Tanh", "Exp", "Log",
        "Softplus", "Elu", "Selu", "Mish", "Pow", "Sqrt", "Sin", "Cos")
_CLASS_OF = {op: cls for cls, ops in CLASSES.items() for op in ops}
FALLBACK = "elementwise"
VIEW = "view"   # ops that move nothing (reshape, permute, getitem): their measured cost, one number


def op_class(op: str, input_shapes=None) -> str:
    """The calibration class of an op type: ``"conv2d"`` -> ``"conv"``. With the op's input
    shapes, a convolution is ``conv_depthwise`` (a group per channel), ``conv_grouped``
    (several channels per group) or ``conv_pointwise`` (a dense 1x1 kernel: a plain GEMM, no
    window), and a product by a weight matrix of fewer than ``FEW_ROWS`` rows (a transformer's
    tokens at batch 1, a small batch) ``matmul_few_rows``: kernels that reach very different
    speeds at the same cost. A batch norm is ``norm_batch``, an adaptive (global) pool
    ``pool_global``, an elementwise op with a transcendental function (``MATH``)
    ``elementwise_math``. A profile without a subclass's curve reads its class's.

    >>> op_class("conv", [(1, 32, 112, 112), (32, 1, 3, 3)]), op_class("linear"), op_class("batch_norm")
    ('conv_depthwise', 'matmul', 'norm_batch')
    >>> op_class("conv", [(1, 256, 56, 56), (64, 256, 1, 1)]), op_class("linear", [(1, 128, 768), (768, 768)])
    ('conv_pointwise', 'matmul_few_rows')
    >>> op_class("gelu"), op_class("relu")
    ('elementwise_math', 'elementwise')
    """
    base = op.rsplit(".", 1)[-1].rsplit("::", 1)[-1]
    kind = _CLASS_OF.get(op, _CLASS_OF.get(base, FALLBACK))
    if kind == "norm" and base in _BATCH_NORMS:
        return "norm_batch"     # a per-channel affine in eval mode: not a layer norm's two passes
    if kind == "pool" and base in _GLOBAL_POOLS:
        return "pool_global"
    if kind == FALLBACK and base in MATH:
        return "elementwise_math"
    operands = _operands(input_shapes)
    if kind == "conv" and operands:
        (_, channels, *_), (_, per_group, *window) = operands
        if per_group and channels > per_group:
            return "conv_depthwise" if per_group == 1 else "conv_grouped"
        if all(size == 1 for size in window):
            return "conv_pointwise"
    # rows by a weight matrix (a 2-D second operand); one row is a matrix-vector product, bound
    # by the weight's bytes, which the roofline already reads
    if kind == "matmul" and operands and len(operands[1]) == 2 and 2 <= math.prod(operands[0][:-1]) < FEW_ROWS:
        return "matmul_few_rows"
    return kind


# Up to here a GEMM by a weight streams the weight past a few rows: the regime of weight-packed
# kernels (flopcount's packed GEMM takes 2 to 200 rows) and of BLAS's small-M paths, whose speed
# per FLOP is not large GEMMs' (RESULTS.md)
FEW_ROWS = 256


def _operands(input_shapes) -> tuple | None:
    """The shapes of an op's first two inputs (a convolution's input and weight, a product's two
    operands), or None where either is unknown."""
    if not input_shapes or len(input_shapes) < 2 or not input_shapes[0] or not input_shapes[1]:
        return None
    return input_shapes[0], input_shapes[1]


GROUPED = "conv_grouped"
PER_GROUP = "per group"     # calibration["grouped"]: the grouped curve holds one group's time


def groups(input_shapes) -> int:
    """How many groups a convolution's input and weight shapes make (1: a dense one).

    >>> groups([(8, 128, 56, 56), (128, 4, 3, 3)])
    32
    """
    operands = _operands(input_shapes)
    if not operands:
        return 1
    channels, per_group = operands[0][1], operands[1][1]
    return max(1, channels // per_group) if per_group else 1


def read_curve(curve, roofline_s: float) -> float:
    """Measured seconds at ``roofline_s`` on ``curve`` ((roofline_s, measured_s), ...)."""
    xs = np.log([max(p[0], 1e-15) for p in curve])
    ys = np.log([p[1] for p in curve])
    x = math.log(max(roofline_s, 1e-15))
    if x <= xs[0]:
        return float(math.exp(ys[0]))                        # the smallest ops' floor
    if x >= xs[-1]:
        return float(math.exp(ys[-1] + (x - xs[-1])))        # the largest ops' efficiency
    return float(math.exp(np.interp(x, xs, ys)))


OVERHEAD = "op_overhead_s"   # calibration[OVERHEAD]: seconds each op costs outside its timed kernel


def op_overhead(cases) -> float:
    """Seconds each op of a run costs outside its own timed span (the dispatch around the
    kernel: shape rules, wrapping the output, the module calls around it), from ``cases`` of
    (whole run's seconds, its ops' timed seconds summed, ops). A whole run also pays a fixed
    cost once (the call into the model, its inputs and outputs), so the gap (whole - ops) is
    fitted as ``run + ops * per_op`` by least squares and ``per_op`` (at least 0) returned: a
    one-op case alone cannot tell the two apart, and cases of many ops (the suite's chain of
    16 small ReLUs) can. 0 with fewer than two distinct op counts. The calibration passes its
    dispatch-bound cases (whole runs of at most ``DISPATCH_BOUND_S`` per op), where the kernels are
    short and the gap is the overhead rather than noise in the kernels' times.

    >>> cases = [(40e-6 + n * 5e-6 + k, k, n) for n, k in ((1, 10e-6), (2, 30e-6), (16, 20e-6))]
    >>> round(op_overhead(cases), 9)
    5e-06
    """
    rows = [(n, whole - ops) for whole, ops, n in cases if n > 0]
    if len({n for n, _ in rows}) < 2:
        return 0.0
    counts = np.array([n for n, _ in rows], dtype=float)
    gaps = np.array([g for _, g in rows], dtype=float)
    design = np.stack([np.ones_like(counts), counts], axis=1)
    (_, per_op), *_ = np.linalg.lstsq(design, gaps, rcond=None)
    return max(0.0, float(per_op))


DISPATCH_BOUND_S = 100e-6


def predict(profile: Profile, op: str, roofline_s: float, input_shapes=None) -> float | None:
    """Seconds ``op`` is predicted to take on a calibrated ``profile`` (None if it is not one):
    its class's curve read at its roofline time, plus the profile's per-op overhead outside
    the kernel (``calibration["op_overhead_s"]``, see :func:`op_overhead`; 0 in profiles written
    before it was measured), which a model's whole runs and its layers pay once per op.
    A grouped convolution reads the grouped curve at one group's roofline time, times the
    groups, where the profile's curve is per group (``calibration["grouped"]``; profiles
    written before it was are read per op)."""
    kernel = _kernel(profile, op, roofline_s, input_shapes)
    return None if kernel is None else kernel + float(profile.calibration.get(OVERHEAD, 0.0))


def _kernel(profile: Profile, op: str, roofline_s: float, input_shapes=None) -> float | None:
    """The op's timed span alone: its class's curve (see :func:`predict`)."""
    if not profile.curves:
        return None
    if roofline_s <= 0:
        views = profile.curves.get(VIEW)
        return float(np.median([p[1] for p in views])) if views else 0.0
    kind = op_class(op, input_shapes)
    if kind == GROUPED and profile.curves.get(GROUPED) and profile.calibration.get("grouped") == PER_GROUP:
        # a grouped convolution costs what its groups cost, each a small dense convolution:
        # 4-channel groups run far slower per FLOP than 32-channel ones of the same total
        n = groups(input_shapes)
        return n * read_curve(profile.curves[GROUPED], roofline_s / n)
    curve = profile.curves.get(kind) or profile.curves.get(kind.split("_")[0]) or profile.curves.get(FALLBACK)
    return None if not curve else read_curve(curve, roofline_s)


def cache_folder() -> str:
    """Where calibrated profiles are kept: ``$XDG_CACHE_HOME/flopcount/hardware``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "flopcount", "hardware")


def path_of(name: str) -> str | None:
    """The file of a calibrated profile given by path or by name, if there is one."""
    if str(name).endswith(".json") and os.path.isfile(name):
        return str(name)
    candidate = os.path.join(cache_folder(), f"{name}.json")
    return candidate if os.path.isfile(candidate) else None


def load(path: str) -> Profile:
    """A calibrated profile from its JSON file; a file that is not one is one FlopcountError."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        curves = {str(k): tuple((float(a), float(b)) for a, b in v) for k, v in data.pop("curves").items()}
        calibration = dict(data.pop("calibration"))
        data["peak_flops"] = {str(k): float(v) for k, v in data["peak_flops"].items()}
        profile = Profile(**data, curves=curves, calibration=calibration)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise FlopcountError(f"{path}: not a calibrated hardware profile ({type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:200]}); write one with flopcount calibrate") from None
    if not curves or any(not c or any(a < 0 or b <= 0 for a, b in c) for c in curves.values()):
        raise FlopcountError(f"{path}: a calibrated profile needs positive (roofline, measured) points in every curve")
    return profile
