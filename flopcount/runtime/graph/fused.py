"""The fused elementwise op: a chain of elementwise ops evaluated by one kernel.

``steps`` lists the chain: ``(op_name, args, attrs)`` per step, where an arg ``a >= 0`` is the
op's input ``a`` and ``a < 0`` is the result of step ``-1 - a``; the last step's result is the
output. On the CPU the kernel runs numpy ufuncs with ``out=`` into the chain's own temporaries,
so a chain of k ops allocates one array instead of k; sigmoid(a)·a runs as one SiLU step, and
GELU's erf form as exporters write it (Div, Erf, Add, Mul, Mul on scalar constants) as one
compiled pass, both with the bits of the steps one by one. On the GPU the chain is one generated
single-pass ``ElementwiseKernel`` (``cuda/kernels/elementwise.py``); chains it cannot express run
CuPy's ufuncs with the same buffer reuse as the CPU.

Cost (COUNTING.md): MACs and FLOPs are the sum of the steps' own cost rules; bytes are only the
fused kernel's external inputs and its output, since intermediates never leave registers/cache.
"""

from __future__ import annotations

__all__ = ["fused_elementwise"]

import numpy as np

from .. import cpu_kernels
from ..autograd import unbroadcast
from ..cuda import kernels as cuda_kernels
from ..dispatch import apply
from ..ops._erf import erf_gelu_chain
from ..ops.elementwise import _small_exponent
from ..registry import Op, get_op, io_cost, register_op


def _ufunc2(name):
    return lambda xp, out, a, b: getattr(xp, name)(a, b, out=out)


def _ufunc1(name):
    return lambda xp, out, a: getattr(xp, name)(a, out=out)


def _pow(xp, out, a, b):
    # as the pow op's kernel: x·x and x·x·x for the exponents 2 and 3 (tanh-GELU's x³), which
    # numpy's general power takes about 250 times longer for
    exponent = _small_exponent(a, b)
    if exponent is None or out.shape != a.shape:
        return xp.power(a, b, out=out)
    if exponent == 2:
        return xp.multiply(a, a, out=out)
    square = xp.multiply(a, a, out=None if out is a else out)  # ``a`` is read again below
    return xp.multiply(square, a, out=out)


def _relu(xp, out, a):
    # the relu op's compiled kernel where it runs (numpy's maximum against a scalar has no SIMD)
    compiled = cpu_kernels.kernel("elementwise", xp)
    if (compiled is not None and a.dtype == np.float32 and out.dtype == np.float32 and a.shape == out.shape
            and a.flags.c_contiguous and out.flags.c_contiguous):
        compiled.relu_float32(a.reshape(-1), out.reshape(-1))
        return out
    return xp.maximum(a, 0, out=out)


def _rsqrt(xp, out, a):
    xp.sqrt(a, out=out)
    return xp.reciprocal(out, out=out)


# Steps written into a buffer in place: the same ufuncs the ops' own kernels call, so results
# are bit-identical to running the ops one by one.
INPLACE = {
    "add": _ufunc2("add"), "sub": _ufunc2("subtract"), "mul": _ufunc2("multiply"),
    "div": _ufunc2("true_divide"), "pow": lambda xp, out, a, b: _pow(xp, out, a, b), "maximum": _ufunc2("maximum"),
    "minimum": _ufunc2("minimum"),
    "neg": _ufunc1("negative"), "abs": _ufunc1("absolute"), "exp": _ufunc1("exp"), "log": _ufunc1("log"),
    "sqrt": _ufunc1("sqrt"), "reciprocal": _ufunc1("reciprocal"), "sin": _ufunc1("sin"),
    "cos": _ufunc1("cos"), "tanh": _ufunc1("tanh"), "rsqrt": _rsqrt,
    "relu": lambda xp, out, a: _relu(xp, out, a),
    "clamp": lambda xp, out, a, min=None, max=None: xp.clip(a, min, max, out=out),
}

# Elementwise ops that may join a chain but run their own kernel (it allocates its result).
OWN_KERNEL = {"sigmoid", "erf", "gelu", "silu", "leaky_relu", "relu6", "hardtanh", "elu", "selu",
              "celu", "hardswish", "hardsigmoid", "softplus", "mish"}

FUSABLE = set(INPLACE) | OWN_KERNEL


def _arg(a: int, inputs, results):
    return inputs[a] if a >= 0 else results[-1 - a]


def _step_specs(xs, steps) -> list:
    specs: list = []
    for name, args, attrs in steps:
        specs.append(get_op(name).shape(*[_arg(a, xs, specs) for a in args], **attrs))
    return specs


def _last_reads(steps) -> list:
    """For each step, the index of the last step that reads its result (-1: none)."""
    last = [-1] * len(steps)
    for k, (_, args, _) in enumerate(steps):
        for a in args:
            if a < 0:
                last[-1 - a] = k
    return last


def _evaluate(xp, arrays, steps, device_type: str):
    """Run the chain, writing into a temporary of the chain once no later step reads it."""
    last = _last_reads(steps)
    results: list = []
    owned: list = []  # results[j] is a buffer this kernel allocated
    for k, (name, args, attrs) in enumerate(steps):
        vals = [_arg(a, arrays, results) for a in args]
        write = INPLACE.get(name)
        if write is None:
            res = get_op(name)._kernel_by_device[device_type](xp, *vals, **attrs)
            fresh = getattr(res, "base", None) is None and all(res is not v for v in vals)
        else:
            shape = vals[0].shape if len(vals) == 1 else np.broadcast_shapes(*(v.shape for v in vals))
            dtype = xp.result_type(*vals)
            out = None
            for a in args:
                j = -1 - a
                if a < 0 and owned[j] and last[j] == k:
                    cand = results[j]
                    if cand.shape == shape and cand.dtype == dtype:
                        out = cand
                        break
            if out is None:
                out = xp.empty(shape, dtype)
            write(xp, out, *vals, **attrs)
            res, fresh = out, True
        results.append(res)
        owned.append(fresh)
    return results[-1]


def merged_silu(steps) -> list:
    """The steps with each sigmoid(a) followed by a multiply by a (the sigmoid's result read
    by nothing else) as one silu(a) step, whose kernel is one pass (compiled on the CPU) and
    gives the same bits: silu's kernel is that multiply by that sigmoid. Only the kernel run
    changes: the node's steps, and so its cost, stay as the graph has them."""
    last = _last_reads(steps)
    reads = [0] * len(steps)
    for _, args, _ in steps:
        for a in args:
            if a < 0:
                reads[-1 - a] += 1
    code = {}  # old step index -> its arg code in the merged steps

    def moved(a):
        return a if a >= 0 else code[-1 - a]

    merged: list = []
    skip = -1
    for k, (name, args, attrs) in enumerate(steps):
        if k == skip:
            continue
        if name == "sigmoid" and k + 1 < len(steps) and reads[k] == 1 and last[k] == k + 1:
            nxt, nxt_args, _ = steps[k + 1]
            if nxt == "mul" and sorted(nxt_args) == sorted((args[0], -1 - k)) and args[0] != -1 - k:
                merged.append(("silu", (moved(args[0]),), {}))
                code[k + 1] = -len(merged)
                skip = k + 1
                continue
        merged.append((name, tuple(moved(a) for a in args), attrs))
        code[k] = -len(merged)
    return merged


def _erf_gelu(xp, xs, steps):
    """GELU's erf form as exporters write it, (x·(erf(x / c) + d))·f or x·(f·(erf(x / c) + d))
    on float32 x and float32 scalars c, d, f, in one compiled pass with the chain's bits; None
    for any other chain, or where the compiled kernels do not run."""
    if len(steps) != 5 or len(xs) != 4 or any(attrs for _, _, attrs in steps):
        return None
    names = [name for name, _, _ in steps]
    args = [tuple(sorted(a)) for _, a, _ in steps]
    if names != ["div", "erf", "add", "mul", "mul"] or steps[0][1] != (0, 1) or args[1:3] != [(-1,), (-2, 2)]:
        return None
    if args[3:] == [(-3, 0), (-4, 3)]:
        factor_first = False
    elif args[3:] == [(-3, 3), (-4, 0)]:
        factor_first = True
    else:
        return None
    x, divisor, offset, factor = xs
    if x.dtype != np.float32 or any(v.shape != () or v.dtype != np.float32 for v in (divisor, offset, factor)):
        return None
    return erf_gelu_chain(xp, x, divisor, offset, factor, factor_first)


def _forward_cpu(xp, *xs, steps):
    y = _erf_gelu(xp, xs, steps)
    return _evaluate(xp, xs, merged_silu(steps), "cpu") if y is None else y


def _forward_cuda(xp, *xs, steps):
    # CuPy's ufuncs with out=, the same buffer reuse as the CPU: for chains the generated
    # single-pass kernel (cuda/kernels/elementwise.py) cannot express
    return _evaluate(xp, xs, steps, "cuda")


@register_op("fused_elementwise")
class FusedElementwise(Op):
    """A chain of elementwise ops as one kernel (made by the fuse_elementwise pass)."""

    kernels = {"cpu": _forward_cpu, "cuda": cuda_kernels.fused(_forward_cuda)}

    def shape(*xs, steps):
        return _step_specs(xs, steps)[-1]

    def forward(xp, *xs, steps):
        return _evaluate(xp, xs, steps, "cpu")

    def vjp(g, out, *xs, steps):
        # Recompute the chain's intermediates with registered ops, then run each step's own
        # gradient rule backwards: the backward work is dispatched and counted like any other.
        results, needs = [], []
        for k, (name, args, attrs) in enumerate(steps):
            op = get_op(name)
            vals = [_arg(a, xs, results) for a in args]
            need = op.vjp is not None and any(v.requires_grad for v in vals)
            if k == len(steps) - 1:
                r = out  # the last result is the op's output: no need to recompute it
            else:
                r = apply(op, *vals, **attrs)
                r.requires_grad = need  # read by the later steps' vjp rules; no autograd node
            results.append(r)
            needs.append(need)
        grads = {-len(steps): g}  # keyed by arg code: >= 0 inputs, < 0 step results
        for k in range(len(steps) - 1, -1, -1):
            gk = grads.pop(-1 - k, None)
            if gk is None or not needs[k]:
                continue
            name, args, attrs = steps[k]
            vals = [_arg(a, xs, results) for a in args]
            gins = get_op(name).vjp(gk, results[k], *vals, **attrs)
            gins = gins if isinstance(gins, tuple) else (gins,)
            for a, v, gi in zip(args, vals, gins):
                if gi is None or not v.requires_grad:
                    continue
                gi = unbroadcast(gi, v.shape)
                grads[a] = gi if a not in grads else _add(grads[a], gi)
        return tuple(grads.get(i) for i in range(len(xs)))

    def cost(out, *xs, steps):
        # the steps' own arithmetic; bytes of the external inputs and the output only
        macs = flops = 0
        for op, spec, ins, attrs in fused_parts(xs, steps):
            c = op.cost(spec, *ins, **attrs)
            macs += c.macs
            flops += c.flops
        return io_cost(out, xs, macs=macs, flops=flops)


def fused_parts(xs, steps) -> list:
    """The steps of a fused node as (op class, output spec, input specs, attrs), so a counter
    can apply its own per-op rules to what the fused kernel computes."""
    specs = _step_specs(xs, steps)
    return [(get_op(name), spec, [_arg(a, xs, specs) for a in args], attrs)
            for (name, args, attrs), spec in zip(steps, specs)]


def _add(a, b):
    from ..ops.elementwise import add

    return add(a, b)


def normalize_steps(steps) -> tuple:
    """Steps as nested tuples with plain-dict attrs (the form the op's attrs use)."""
    return tuple((str(name), tuple(int(a) for a in args), dict(attrs or {})) for name, args, attrs in steps)


def fused_elementwise(*inputs, steps):
    """Evaluate an elementwise chain as one op.

    >>> import flopcount.runtime as rt
    >>> x, y = rt.tensor([-1.0, 2.0]), rt.tensor([3.0, 3.0])
    >>> fused_elementwise(x, y, steps=[("mul", (0, 1), {}), ("relu", (-1,), {})]).tolist()
    [0.0, 6.0]
    """
    return apply(FusedElementwise, *inputs, steps=normalize_steps(steps))
