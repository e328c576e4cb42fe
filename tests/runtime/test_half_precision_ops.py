"""Every registered op in float16 and bfloat16 on the CPU: each op example (tests/runtime/ops)
runs on half-precision inputs, and its outputs and gradients keep the half dtype and agree with
the same example run in float32 on the same (already rounded) values, within the half type's
precision. numpy has no bfloat16 arithmetic: this checks the dispatcher's widening to float32
and rounding back (as PyTorch's CPU kernels do) for every op, forward and backward."""

import os
import sys

import ml_dtypes
import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import Recorder

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "cuda"))
from op_examples import load_examples  # noqa: E402

EXAMPLES = load_examples()
# a few roundings of the half type (inputs are exact in it; outputs, composites' intermediate
# results and the gradient's output weights are rounded)
TOLERANCE = {"float16": 4 * 2.0 ** -10, "bfloat16": 4 * 2.0 ** -7}
HALF = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def _run(example, np_dtype):
    """(outputs, gradients, events) of the example with its float inputs in ``np_dtype``."""
    rt.manual_seed(0)
    tensors = []
    for i, a in enumerate(example.arrays):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            t = rt.tensor(a.astype(np_dtype))
            if example.grad and (example.grad_wrt is None or i in example.grad_wrt):
                t.requires_grad_(True)
            tensors.append(t)
        elif isinstance(a, np.ndarray):
            tensors.append(rt.tensor(a))
        else:
            tensors.append(a)
    rec = Recorder()
    with rt.observe(rec):
        result = example.fn(*tensors)
        outs = [o for o in (result if isinstance(result, (tuple, list)) else [result]) if isinstance(o, rt.Tensor)]
        floats = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
        if example.grad and floats:
            rng = np.random.default_rng(3)
            loss = None
            for o in floats:
                w = rng.standard_normal(o.shape).astype(np_dtype)  # exact in both runs
                term = (o * rt.tensor(w)).sum()
                loss = term if loss is None else loss + term
            loss.backward()
    grads = [t.grad for t in tensors if isinstance(t, rt.Tensor) and t.requires_grad]
    return outs, grads, rec.events


def _rounded(example, np_dtype):
    """The example with its float inputs rounded to ``np_dtype`` and held in float32."""
    import copy

    ex = copy.copy(example)
    ex.arrays = [a.astype(np_dtype).astype(np.float32) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
                 for a in example.arrays]
    return ex


def _close(half, full, dtype_name, what):
    want = rt.get_dtype(dtype_name) if full.dtype is rt.float32 else full.dtype
    assert half.dtype is want, f"{what}: {half.dtype.name}, expected {want.name}"
    assert half.shape == full.shape, what
    ref = full.numpy().astype(np.float64)
    got = half.numpy().astype(np.float64)
    tol = TOLERANCE[dtype_name]
    finite = ref[np.isfinite(ref)]
    scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * scale, err_msg=what, equal_nan=True)


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_op_in_half_precision_matches_float32(name, dtype_name):
    example = EXAMPLES[name]
    np_dtype = HALF[dtype_name]
    half_out, half_grads, half_events = _run(example, np_dtype)
    full_out, full_grads, _ = _run(_rounded(example, np_dtype), np.float32)
    assert name in {e.op.name for e in half_events}, f"{name} was not dispatched"
    for k, (h, f) in enumerate(zip(half_out, full_out)):
        _close(h, f, dtype_name, f"{name}: output {k}")
    for k, (h, f) in enumerate(zip(half_grads, full_grads)):
        assert (h is None) == (f is None), f"{name}: gradient {k}"
        if h is not None:
            _close(h, f, dtype_name, f"{name}: gradient of input {k}")
