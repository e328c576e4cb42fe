"""The op EXAMPLES of tests/runtime/ops (opcheck.all_examples), and the ops'
calls recorded while they run: what the CUDA kernels are checked against."""

from __future__ import annotations

import numpy as np

import flopcount.runtime as rt
from opcheck import _to_tensors, all_examples


def load_examples(runnable: bool = True) -> dict:
    """op name -> Example, from every tests/runtime/ops/test_*.py; with ``runnable``, not those
    of ops that have no kernel by nature (``Example(runs=False)``: nothing of theirs can run on
    any device)."""
    return {name: ex for name, (ex, _) in all_examples().items() if ex.runs or not runnable}


class Calls:
    """Observer keeping (op, input arrays, attrs, output arrays) of every dispatched op."""

    def __init__(self):
        self.calls = []

    def on_op(self, event):
        ins = [None if t is None else t.data for t in event.inputs]
        outs = [t.data for t in event.outputs]
        self.calls.append((event.op, ins, dict(event.attrs), outs))


def recorded_calls(example, dtype=np.float64) -> list:
    """The op calls (forward and backward) of one example run on CPU tensors of ``dtype``."""
    tensors = _to_tensors(example.arrays, dtype, requires_grad=example.grad)
    calls = Calls()
    with rt.observe(calls):
        out = example.fn(*tensors)
        outs = [o for o in (out if isinstance(out, (tuple, list)) else [out])
                if isinstance(o, rt.Tensor) and o.dtype.is_floating_point and o.requires_grad]
        if outs:
            total = outs[0].sum()
            for o in outs[1:]:
                total = total + o.sum()
            total.backward()
    return calls.calls


def specialized(op) -> bool:
    """True when ``op`` has a CUDA kernel of its own (not its generic array kernel)."""
    return op._kernel_by_device["cuda"] is not op.forward


def run_cuda_kernels(xp, examples: dict, dtypes) -> int:
    """Every specialized CUDA kernel called with ``xp`` (a stand-in CuPy) on the inputs the ops
    received while each example ran on the CPU in each of ``dtypes``; random draws skipped.
    Returns the number of calls."""
    count = 0
    for name in sorted(examples):
        for dtype in dtypes:
            for op, ins, attrs, _ in recorded_calls(examples[name], dtype):
                if specialized(op) and not (op.random and attrs.get("dropout_p", 0) > 0):
                    op._kernel_by_device["cuda"](xp, *ins, **attrs)
                    count += 1
    return count
