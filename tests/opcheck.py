"""Checks every op test uses: forward against a reference, gradient against central finite
differences (float64), meta shape/dtype against eager, and the cost the dispatcher reports.

    out = check_op(lambda x, w: F.linear(x, w), [x, w], reference=lambda x, w: x @ w.T)
    assert op_costs(lambda: F.linear(xt, wt))["linear"].macs == 3 * 4 * 5
"""

from __future__ import annotations

import importlib.util
import pathlib
from collections import defaultdict
from functools import lru_cache

import numpy as np

import flopcount.runtime as rt


class Recorder:
    """An observer that keeps every OpEvent."""

    def __init__(self, timing: bool = False):
        self.events = []
        self.timing = timing

    def on_op(self, event):
        self.events.append(event)


def record(fn):
    """Run ``fn()`` and return (its result, the list of OpEvents it dispatched)."""
    rec = Recorder()
    with rt.observe(rec):
        out = fn()
    return out, rec.events


def op_costs(fn) -> dict:
    """Total Cost per op name of what ``fn()`` dispatched."""
    _, events = record(fn)
    totals: dict = defaultdict(rt.Cost)
    for e in events:
        totals[e.op.name] = totals[e.op.name] + e.cost
    return dict(totals)


def linear_adjoint(forward, in_shape, g) -> np.ndarray:
    """The gradient of sum(g · forward(x)) for a numpy ``forward`` linear in x, one basis input
    at a time: the reference for the backward of linear ops (pooling, resampling, a conv's
    weight gradient)."""
    gx = np.zeros(in_shape)
    for idx in np.ndindex(*in_shape):
        basis = np.zeros(in_shape)
        basis[idx] = 1.0
        gx[idx] = (g * forward(basis)).sum()
    return gx


def forward_backward_with_torch(ours, theirs, arrays, rng) -> list:
    """Run ``theirs`` on torch tensors and ``ours`` on runtime tensors made from the same
    float32 ``arrays``, and backpropagate the same output gradient (drawn from ``rng`` once
    torch's output shape is known) through both. Returns numpy (ours, theirs) pairs: the
    outputs, then each array's gradient."""
    import torch

    theirs_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    ty = theirs(*theirs_in)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(g))
    ours_in = [rt.tensor(a, requires_grad=True) for a in arrays]
    ry = ours(*ours_in)
    (ry * rt.tensor(g)).sum().backward()
    return [(ry.numpy(), ty.detach().numpy())] + [(r.grad.numpy(), t.grad.numpy())
                                                   for r, t in zip(ours_in, theirs_in)]


def _to_tensors(arrays, dtype=None, requires_grad=False):
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            arr = a.astype(dtype) if dtype is not None else a
            out.append(rt.tensor(arr, requires_grad=requires_grad))
        elif isinstance(a, np.ndarray):
            out.append(rt.tensor(a))
        else:
            out.append(a)
    return out


def _outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def check_forward(fn, arrays, reference, rtol=1e-5, atol=1e-6):
    """fn on float64 tensors equals ``reference`` on the numpy arrays."""
    outs = _outputs(fn(*_to_tensors(arrays, np.float64)))
    refs = _outputs(reference(*[a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
                                for a in arrays]))
    assert len(outs) == len(refs), f"{len(outs)} outputs, reference has {len(refs)}"
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o.numpy(), np.asarray(r), rtol=rtol, atol=atol)
    return outs


def check_grad(fn, arrays, eps=1e-6, rtol=1e-4, atol=1e-6, wrt=None):
    """Autograd gradients of a random projection of fn's outputs equal central differences.

    ``wrt`` lists the positions of the float inputs to check (default: all float inputs).
    """
    rng = np.random.default_rng(1)
    arrays = [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in arrays]
    float_pos = [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    wrt = float_pos if wrt is None else list(wrt)
    tensors = _to_tensors(arrays)
    for i in wrt:
        tensors[i].requires_grad_(True)
    outs = _outputs(fn(*tensors))
    outs = [o for o in outs if o.dtype.is_floating_point]
    weights = [rng.standard_normal(o.shape) for o in outs]
    loss = None
    for o, w in zip(outs, weights):
        term = (o * rt.tensor(w)).sum()
        loss = term if loss is None else loss + term
    loss.backward()

    def objective(values):
        with rt.no_grad():
            res = _outputs(fn(*_to_tensors(values)))
        res = [r for r in res if r.dtype.is_floating_point]
        return sum(float((r.numpy() * w).sum()) for r, w in zip(res, weights))

    for i in wrt:
        analytic = tensors[i].grad
        assert analytic is not None, f"input {i} got no gradient"
        numeric = np.zeros_like(arrays[i])
        flat = numeric.reshape(-1)
        for k in range(flat.size):
            plus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
            minus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
            plus[i].reshape(-1)[k] += eps
            minus[i].reshape(-1)[k] -= eps
            flat[k] = (objective(plus) - objective(minus)) / (2 * eps)
        np.testing.assert_allclose(analytic.numpy(), numeric, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i}")


def check_meta(fn, arrays):
    """fn on meta tensors gives the shapes and dtypes of fn on CPU tensors."""
    eager = _outputs(fn(*_to_tensors(arrays)))
    meta_inputs = [t.to("meta") if isinstance(t, rt.Tensor) else t for t in _to_tensors(arrays)]
    meta = _outputs(fn(*meta_inputs))
    assert len(eager) == len(meta)
    for e, m in zip(eager, meta):
        assert m.device.type == "meta"
        assert m.shape == e.shape, f"meta shape {m.shape} != eager {e.shape}"
        assert m.dtype is e.dtype, f"meta dtype {m.dtype} != eager {e.dtype}"
        assert e.shape == e.numpy().shape, "the spec's shape differs from the kernel's array"


def check_op(fn, arrays, reference=None, grad=True, meta=True, rtol=1e-5, atol=1e-6, grad_wrt=None,
             grad_rtol=1e-4, grad_atol=1e-6):
    """All of the above that apply."""
    if reference is not None:
        check_forward(fn, arrays, reference, rtol=rtol, atol=atol)
    if meta:
        check_meta(fn, arrays)
    if grad:
        check_grad(fn, arrays, wrt=grad_wrt, rtol=grad_rtol, atol=grad_atol)


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


class Example:
    """One canonical use of an op: how to call it, its inputs, a numpy reference, and the cost
    (MACs and FLOPs) the hand formula of COUNTING.md gives for it."""

    def __init__(self, fn, arrays, reference=None, grad=True, meta=True, macs=None, flops=None,
                 rtol=1e-5, atol=1e-6, grad_wrt=None, grad_rtol=1e-4, grad_atol=1e-6, runs=True):
        self.fn, self.arrays, self.reference = fn, arrays, reference
        self.runs = runs  # False: the op has no kernel by nature (opaque); checked on meta only
        self.grad, self.meta = grad, meta
        self.macs, self.flops = macs, flops
        self.rtol, self.atol = rtol, atol
        self.grad_wrt, self.grad_rtol, self.grad_atol = grad_wrt, grad_rtol, grad_atol


def run_example(name: str, ex: Example) -> None:
    """Check the example's forward, gradient, meta shapes, and the cost of op ``name``."""
    check_op(ex.fn, ex.arrays, ex.reference, grad=ex.grad, meta=ex.meta, rtol=ex.rtol, atol=ex.atol,
             grad_wrt=ex.grad_wrt, grad_rtol=ex.grad_rtol, grad_atol=ex.grad_atol)
    tensors = _to_tensors(ex.arrays, np.float32)
    costs = op_costs(lambda: ex.fn(*tensors))
    assert name in costs, f"the example for {name!r} did not dispatch it (dispatched: {sorted(costs)})"
    if ex.macs is not None:
        assert costs[name].macs == ex.macs, f"{name}: MACs {costs[name].macs} != formula {ex.macs}"
    if ex.flops is not None:
        assert costs[name].flops == ex.flops, f"{name}: FLOPs {costs[name].flops} != formula {ex.flops}"


OP_TESTS = pathlib.Path(__file__).parent / "runtime" / "ops"


@lru_cache(maxsize=None)
def all_examples() -> dict:
    """op name -> (its Example, the test file that gives it), from the ``EXAMPLES`` of every
    ``tests/runtime/ops/test_*.py``; each file is loaded once per session."""
    examples = {}
    for path in sorted(OP_TESTS.glob("test_*.py")):
        if path.stem == "test_registry":
            continue
        spec = importlib.util.spec_from_file_location(f"_opexamples_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, example in getattr(module, "EXAMPLES", {}).items():
            assert name not in examples, f"two test files give an example for {name!r}"
            examples[name] = (example, path.name)
    return examples
