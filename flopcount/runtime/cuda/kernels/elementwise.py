"""Elementwise kernels generated from expressions: single activations (gelu, silu, sigmoid...)
and whole chains of the graph's ``fused_elementwise`` op, one ``cupy.ElementwiseKernel`` each.

A plain CuPy ufunc chain launches one kernel per step and writes every intermediate to memory;
``gelu`` alone is about ten of them. Here each op is an expression over its arguments
(``EXPRESSIONS``), a chain is one statement per step into registers, and the kernel reads its
inputs once and writes one output. Arithmetic runs in the accumulation type (float32 for
float16 and bfloat16, as the CPU kernels' upcasts), with NaN handling as numpy's ufuncs.

Expressions use a small subset common to C++ and Python — arithmetic, comparisons, calls of
the functions in ``FUNCTIONS`` and ``acc_t(constant)`` — so ``evaluate`` runs the generated
statements with numpy, and CPU tests check the generated code against the ops' own kernels.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from ._source import FLOAT_DTYPES, INFINITY_GUARD, acc_dtype, dtype_name
from .cache import kernel

# name -> (CUDA body for float and double overloads, numpy function); ``{f}`` is "f" or "".
FUNCTIONS = {
    "exp_": ("return exp{f}(a);", lambda: np.exp),
    "log_": ("return log{f}(a);", lambda: np.log),
    "log1p_": ("return log1p{f}(a);", lambda: np.log1p),
    "expm1_": ("return expm1{f}(a);", lambda: np.expm1),
    "sqrt_": ("return sqrt{f}(a);", lambda: np.sqrt),
    "tanh_": ("return tanh{f}(a);", lambda: np.tanh),
    "sin_": ("return sin{f}(a);", lambda: np.sin),
    "cos_": ("return cos{f}(a);", lambda: np.cos),
    "abs_": ("return fabs{f}(a);", lambda: np.abs),
    "erf_": ("return erf{f}(a);", lambda: _numpy_erf),
    "pow_": ("return pow{f}(a, b);", lambda: np.power),
    # numpy's maximum/minimum: a NaN on either side wins
    "max_nan": ("return (a != a) ? a : ((b != b) ? b : (a > b ? a : b));", lambda: np.maximum),
    "min_nan": ("return (a != a) ? a : ((b != b) ? b : (a < b ? a : b));", lambda: np.minimum),
}
_BINARY = {"pow_", "max_nan", "min_nan"}


def _numpy_erf(x):
    from ...ops._erf import erf

    return erf(np, x)


def preamble() -> str:
    """CUDA definitions of ``FUNCTIONS`` (float and double overloads) and ``sel``."""
    lines = INFINITY_GUARD.splitlines() + ["#define sel(c, a, b) ((c) ? (a) : (b))"]
    for name, (body, _) in FUNCTIONS.items():
        for ctype, f in (("float", "f"), ("double", "")):
            params = f"{ctype} a, {ctype} b" if name in _BINARY else f"{ctype} a"
            lines.append(f"__device__ __forceinline__ {ctype} {name}({params}) {{ {body.format(f=f)} }}")
    return "\n".join(lines) + "\n"


def const(value: float) -> str:
    """A constant in the accumulation type, spelled the same in C++ and Python."""
    value = float(value)
    if math.isinf(value):
        return "acc_t(-INFINITY)" if value < 0 else "acc_t(INFINITY)"
    return f"acc_t({value!r})"


def _sigmoid(x: str) -> str:
    # the CPU kernel's overflow-free form: e = exp(-|x|), 1/(1+e) for x >= 0, else e/(1+e)
    e = f"exp_(-abs_({x}))"
    return f"sel({x} >= acc_t(0.0), acc_t(1.0) / (acc_t(1.0) + {e}), {e} / (acc_t(1.0) + {e}))"


def _softplus(z: str) -> str:
    return f"(max_nan({z}, acc_t(0.0)) + log1p_(exp_(-abs_({z}))))"


def _clip(x: str, lo, hi) -> str:
    # numpy's clip is minimum(maximum(x, lo), hi)
    if lo is not None:
        x = f"max_nan({x}, {const(lo)})"
    if hi is not None:
        x = f"min_nan({x}, {const(hi)})"
    return x


def _gelu(x: str, approximate: str) -> str:
    if approximate == "tanh":
        inner = f"{const(math.sqrt(2 / math.pi))} * ({x} + acc_t(0.044715) * {x} * {x} * {x})"
        return f"acc_t(0.5) * {x} * (acc_t(1.0) + tanh_({inner}))"
    return f"acc_t(0.5) * {x} * (acc_t(1.0) + erf_({x} * {const(1 / math.sqrt(2))}))"


def _softplus_op(x: str, beta: float, threshold: float) -> str:
    z = f"({x} * {const(beta)})"
    return f"sel({z} > {const(threshold)}, {x}, {_softplus(z)} / {const(beta)})"


def _elu(x: str, alpha: float, scale: float, input_scale: float) -> str:
    negative = f"{const(alpha)} * expm1_(min_nan({x}, acc_t(0.0)) * {const(input_scale)})"
    return f"{const(scale)} * sel({x} > acc_t(0.0), {x}, {negative})"


def _hardsigmoid(x: str) -> str:
    return f"{_clip(f'({x} + acc_t(3.0))', 0, 6)} / acc_t(6.0)"


# op name -> expression builder (argument names, **attrs); the forms follow each op's CPU kernel.
EXPRESSIONS = {
    "add": lambda a, b: f"({a} + {b})",
    "sub": lambda a, b: f"({a} - {b})",
    "mul": lambda a, b: f"({a} * {b})",
    "div": lambda a, b: f"({a} / {b})",
    "pow": lambda a, b: f"pow_({a}, {b})",
    "maximum": lambda a, b: f"max_nan({a}, {b})",
    "minimum": lambda a, b: f"min_nan({a}, {b})",
    "neg": lambda a: f"(-{a})",
    "abs": lambda a: f"abs_({a})",
    "exp": lambda a: f"exp_({a})",
    "log": lambda a: f"log_({a})",
    "sqrt": lambda a: f"sqrt_({a})",
    "rsqrt": lambda a: f"(acc_t(1.0) / sqrt_({a}))",
    "reciprocal": lambda a: f"(acc_t(1.0) / {a})",
    "sin": lambda a: f"sin_({a})",
    "cos": lambda a: f"cos_({a})",
    "tanh": lambda a: f"tanh_({a})",
    "erf": lambda a: f"erf_({a})",
    "relu": lambda a: f"max_nan({a}, acc_t(0.0))",
    "clamp": lambda a, min=None, max=None: _clip(a, min, max),
    "hardtanh": lambda a, min_val, max_val: _clip(a, min_val, max_val),
    "leaky_relu": lambda a, negative_slope: f"sel({a} > acc_t(0.0), {a}, {a} * {const(negative_slope)})",
    "sigmoid": _sigmoid,
    "silu": lambda a: f"({a} * {_sigmoid(a)})",
    "gelu": _gelu,
    "hardsigmoid": _hardsigmoid,
    "hardswish": lambda a: f"({a} * {_hardsigmoid(a)})",
    "softplus": _softplus_op,
    "mish": lambda a: f"({a} * tanh_({_softplus(a)}))",
    "elu": _elu,
}


def statements(steps, n_inputs: int) -> list:
    """``(name, expression)`` per step: inputs are ``v0..``, step k's result is ``r{k}``."""
    out = []
    for k, (op, args, attrs) in enumerate(steps):
        names = [f"v{a}" if a >= 0 else f"r{-1 - a}" for a in args]
        out.append((f"r{k}", EXPRESSIONS[op](*names, **attrs)))
    return out


def can_generate(steps, arrays) -> bool:
    """A chain of known ops over inputs of one float dtype."""
    dtypes = {str(a.dtype) for a in arrays}
    return (len(dtypes) == 1 and dtypes.pop() in FLOAT_DTYPES
            and all(op in EXPRESSIONS for op, _, _ in steps))


def kernel_body(steps, n_inputs: int, dtype) -> str:
    """The ElementwiseKernel operation: load the inputs, one line per step, store the last."""
    acc = "double" if dtype_name(dtype) == "float64" else "float"
    lines = [f"typedef {acc} acc_t;"]
    lines += [f"acc_t v{i} = acc_t(x{i});" for i in range(n_inputs)]
    stmts = statements(steps, n_inputs)
    lines += [f"acc_t {name} = {expr};" for name, expr in stmts]
    lines.append(f"out = T({stmts[-1][0]});")
    return "\n".join(lines)


def kernel_spec(steps, n_inputs: int, dtype) -> dict:
    """The ``cupy.ElementwiseKernel`` arguments of a chain: ``in_params``, ``out_params``,
    ``operation``, ``name`` and ``preamble`` (the name is a hash of the body, so a chain has one
    name whatever process builds it).

    >>> spec = kernel_spec((("relu", (0,), {}),), 1, "float32")
    >>> spec["in_params"], spec["out_params"], spec["name"].startswith("flopcount_ew_")
    ('T x0', 'T out', True)
    """
    body = kernel_body(steps, n_inputs, dtype)
    digest = hashlib.sha1(body.encode()).hexdigest()[:16]
    return {"in_params": ", ".join(f"T x{i}" for i in range(n_inputs)), "out_params": "T out",
            "operation": body, "name": f"flopcount_ew_{digest}", "preamble": preamble()}


def _elementwise_kernel(steps, n_inputs: int, dtype):
    spec = kernel_spec(steps, n_inputs, dtype)

    def build():
        import cupy

        return cupy.ElementwiseKernel(**spec)

    return kernel("elementwise", dtype, build, variant=spec["operation"])


def run_chain(xp, arrays, steps):
    """The chain's output from one generated kernel, or None when it cannot be generated."""
    if not can_generate(steps, arrays):
        return None
    if xp is np:
        return evaluate(arrays, steps)
    return _elementwise_kernel(steps, len(arrays), arrays[0].dtype)(*arrays)


def evaluate(arrays, steps) -> np.ndarray:
    """The generated statements run by numpy: the code a kernel would execute, on the CPU."""
    dtype = arrays[0].dtype
    acc = acc_dtype(dtype).type
    env = {name: fn() for name, (_, fn) in FUNCTIONS.items()}
    env.update(sel=np.where, acc_t=acc, INFINITY=np.inf)
    local = {f"v{i}": np.asarray(a).astype(acc) for i, a in enumerate(arrays)}
    with np.errstate(all="ignore"):  # both branches of a select are evaluated here
        for name, expr in statements(steps, len(arrays)):
            local[name] = np.asarray(eval(expr, env, local), dtype=acc)  # noqa: S307 (generated above)
    return local[name].astype(dtype)


# --- op-level kernels --------------------------------------------------------------------------

def activation(op_name: str):
    """A CUDA kernel for elementwise op ``op_name``: one generated kernel for float inputs, the
    op's generic kernel ``generic`` otherwise.  Use as ``kernels = {"cuda": activation("gelu")(forward)}``."""

    def bind(generic):
        def run(xp, x, **attrs):
            out = run_chain(xp, [x], ((op_name, (0,), attrs),))
            return generic(xp, x, **attrs) if out is None else out

        run.__name__ = f"{op_name}_cuda"
        return run

    return bind


def fused(generic):
    """The CUDA kernel of ``fused_elementwise``: the whole chain as one generated kernel."""

    def run(xp, *arrays, steps):
        out = run_chain(xp, list(arrays), steps)
        return generic(xp, *arrays, steps=steps) if out is None else out

    return run
