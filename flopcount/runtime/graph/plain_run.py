"""A run of a graph that nothing watches, on the CPU or a GPU: each node's kernel called on arrays.

Through ``dispatch.apply`` a node pays for its shape rule, its device check, a Tensor per
output, the autograd and observer checks and the scope stack: 10-20 us, which on a mobile
network of 140-240 small nodes is a fifth of the run. When none of that can be seen (no
observer, tracer, gradient recording, callbacks or node scopes, arrays on one device, no dtype
its backend computes in a wider one), the executor runs this instead: the graph with its
elementwise chains fused (``fuse_elementwise``; the graph itself, and so every count, stays as
it is), each node's CPU kernel called on the arrays of its inputs, values released at their last
use by the fused graph's memory plan; a float32 conv read only by the next step, an activation
or a residual add (then maybe ReLU), runs what follows it in one compiled pass over its output,
and a float32 matmul read only by a bias add adds it into its own output in place. On a GPU,
a linear read only by a ReLU or a tanh GELU runs with it as one cuBLASLt matmul whose epilogue
adds the bias and applies the activation (``cuda/kernels/cublaslt.py``): two ops become one
step only here, where no observer expects to see (or time) each of them.
Results are those of the node-by-node run: the same kernels (and the same float32 operations
in the fused passes), outputs cast to each value's dtype as ``apply`` casts them.
"""

from __future__ import annotations

import numpy as np

from ..cuda.kernels.linalg import activation_of, linear_activation
from ..device import backend
from ..dispatch import state
from ..errors import add_context
from ..ops._conv_kernels import conv_forward_activation, conv_forward_residual
from ..tensor import Tensor
from .fused import merged_silu
from .passes.memory_plan import Slots
from .printing import node_summary


class _PlainProgram(Slots):
    """The fused graph lowered to slots, with each node's CPU kernel and output dtypes."""

    __slots__ = ("outputs", "specs", "checked")

    def __init__(self, graph, device_type: str = "cpu"):
        from .passes.fuse_elementwise import fuse_elementwise

        fused = fuse_elementwise(graph)
        super().__init__(fused)
        values = {v.name: v for v in fused.values()}
        self.specs = {name: (values[name].shape, values[name].dtype) for _, name in self.fixed}
        self.checked = None  # the last ``fixed`` dict found to fit the traced shapes
        self.outputs = list(fused.outputs)
        steps = [(node, node.op._kernel_by_device[device_type], ins, outs, tuple(v.dtype.np for v in node.outputs),
                  free) for node, ins, outs, free in self.steps]
        self.steps = _with_epilogues(fused, steps, _EPILOGUES[device_type])


def applies(graph, cache: dict, tensors, before, after, node_scopes: bool) -> bool:
    """Whether a run of ``graph`` on ``tensors`` may be a plain one (see the module docstring);
    ``cache`` is its GraphModule's."""
    st = state
    if (before is not None or after is not None or node_scopes or st.observers or st.tracer is not None
            or st.shapes_only or st.grad_enabled):
        return False
    dev = tensors[0].device if tensors else graph.device
    if dev.type not in _EPILOGUES or any(t.device != dev for t in tensors):
        return False
    key = _cache_key("plain_usable", dev)
    usable = cache.get(key)
    if usable is None:
        wide = backend(dev).compute_dtypes
        usable = cache[key] = not any(v.dtype in wide for v in graph.values())
    return usable


def run(graph, cache: dict, tensors, fixed: dict) -> list | None:
    """The graph's outputs (Tensors, in output order) for input ``tensors``; ``fixed`` maps the
    names of parameters and constants to their Tensors on the inputs' device. None where a
    parameter or constant no longer has its traced shape or dtype (swapped after tracing): no
    shape rule runs here, so the node-by-node run must, and name the node that cannot take it."""
    dev = tensors[0].device if tensors else graph.device
    xp = np if dev.type == "cpu" else backend(dev).xp  # backend(dev) also makes a GPU current
    key = _cache_key("plain_program", dev)
    prog = cache.get(key)
    if prog is None:
        prog = cache[key] = _PlainProgram(graph, dev.type)
    if prog.checked is not fixed:
        if any((tuple(fixed[name].shape), fixed[name].dtype) != prog.specs[name] for _, name in prog.fixed):
            return None
        prog.checked = fixed
    env: list = [None] * prog.n_slots
    for slot, name in prog.fixed:
        env[slot] = fixed[name].data
    for slot, t in zip(prog.input_slots, tensors):
        env[slot] = t.data
    for node, kernel, ins, outs, dtypes, free in prog.steps:
        arrays = [None if i < 0 else env[i] for i in ins]
        try:
            result = kernel(xp, *arrays, **node.attrs)
        except Exception as exc:
            add_context(exc, f"while executing {node_summary(node)}")
            raise
        if len(outs) == 1:
            env[outs[0]] = _cast(xp, result, dtypes[0])
        else:
            for s, r, dtype in zip(outs, result, dtypes):
                env[s] = _cast(xp, r, dtype)
        for s in free:
            env[s] = None
    if dev.type != "cpu":
        backend(dev).kernel_library()  # forget the paths noted: no op event reads them here
    return [Tensor._make(env[s], v.shape, v.dtype, dev) for s, v in zip(prog.output_slots, prog.outputs)]


def _cache_key(name: str, dev) -> str:
    # one program per device kind: a graph without parameters may run on the CPU and a GPU
    return name if dev.type == "cpu" else f"{name}_{dev.type}"


def _cast(xp, array, dtype):
    # as dispatch._wrap: a kernel may return a numpy scalar or a wider dtype; the value's
    # dtype decides
    if type(array) is not xp.ndarray or array.dtype != dtype:
        array = xp.asarray(array, dtype=dtype)
    return array


def _activation(node) -> str | None:
    """The activation a conv's output may take in place ("relu", "hardswish", "silu": a fused
    x·sigmoid(x)), or None."""
    name = node.op.name
    if name in ("relu", "hardswish"):
        return name
    if name == "fused_elementwise" and len(node.inputs) == 1 and \
            merged_silu(node.attrs["steps"]) == [("silu", (0,), {})]:
        return "silu"
    return None


def _residual(node, value) -> tuple | None:
    """(index of the other input, whether ReLU follows) where ``node`` adds ``value`` to another
    value of its shape, then maybe runs ReLU (a residual block's end: an ``add``, or a fused
    add-then-ReLU), else None."""
    steps = node.attrs.get("steps") if node.op.name == "fused_elementwise" else None
    if node.op.name == "add":
        relu = False
    elif steps is not None and tuple(steps) == (("add", (0, 1), {}), ("relu", (-1,), {})):
        relu = True
    else:
        return None
    if len(node.inputs) != 2 or sum(v is value for v in node.inputs) != 1:
        return None
    other = 1 if node.inputs[0] is value else 0
    return (other, relu) if tuple(node.inputs[other].shape) == tuple(value.shape) else None


def _bias(node, value) -> int | None:
    """The index of the other input where ``node`` is an ``add`` of ``value`` and a float32
    value that broadcasts to ``value``'s shape without growing it (a bias), else None."""
    if node.op.name != "add" or len(node.inputs) != 2 or sum(v is value for v in node.inputs) != 1:
        return None
    other = 1 if node.inputs[0] is value else 0
    bias = node.inputs[other]
    shape, bias_shape = tuple(value.shape), tuple(bias.shape)
    fits = len(bias_shape) <= len(shape) and all(
        b in (1, n) for b, n in zip(bias_shape[::-1], shape[::-1]))
    return other if fits and bias.dtype.np == np.float32 and tuple(node.outputs[0].shape) == shape else None


def _with_epilogues(graph, steps: list, epilogue) -> list:
    """The steps with each node whose one output only the next step reads run as one step with
    it where ``epilogue(node, kernel, next node, next kernel, next input slots, value)`` gives a
    kernel for the two (``_epilogue`` on the CPU, ``_cuda_epilogue`` on a GPU)."""
    users = graph.users()
    outputs = {v.name for v in graph.outputs}
    merged: list = []
    k = 0
    while k < len(steps):
        node, kernel, ins, outs, dtypes, free = steps[k]
        if k + 1 < len(steps) and len(node.outputs) == 1:
            next_node, next_kernel, next_ins, next_outs, next_dtypes, next_free = steps[k + 1]
            value = node.outputs[0]
            fused_kernel, extra = None, ()
            if value.name not in outputs and len(users.get(value.name, ())) == 1:
                fused_kernel, extra = epilogue(node, kernel, next_node, next_kernel, next_ins, value)
            if fused_kernel is not None:
                merged.append((node, fused_kernel, tuple(ins) + extra, next_outs, next_dtypes, free + next_free))
                k += 2
                continue
        merged.append(steps[k])
        k += 1
    return merged


def _epilogue(node, kernel, next_node, next_kernel, next_ins, value) -> tuple:
    """(the kernel of ``node`` and the step after it as one, the slots it reads after the
    node's own), or (None, ()) where the next step is no such epilogue: a float32 conv's bias
    with an activation, or with a residual add (then maybe ReLU), in one compiled pass; a float32
    matmul's bias add."""
    if node.op.name not in ("conv", "matmul") or value.dtype.np != np.float32:
        return None, ()
    if node.op.name == "matmul":
        other = _bias(next_node, value)
        if other is None:
            return None, ()
        return _matmul_plus(kernel, next_kernel, dict(next_node.attrs), other), (next_ins[other],)
    activation = _activation(next_node)
    if activation is not None and next_node.inputs[0] is value:
        return _conv_then(kernel, next_kernel, dict(next_node.attrs), activation), ()
    residual = _residual(next_node, value)
    if residual is not None:
        other, relu = residual
        return _conv_plus(kernel, next_kernel, dict(next_node.attrs), other, relu), (next_ins[other],)
    return None, ()


def _cuda_epilogue(node, kernel, next_node, next_kernel, next_ins, value) -> tuple:
    """As ``_epilogue``, on a GPU: a linear (with or without its bias) and a ReLU or tanh GELU
    of its output, as one cuBLASLt matmul (``linear_activation``)."""
    activation = activation_of(next_node.op.name, next_node.attrs)
    if node.op.name != "linear" or activation is None or tuple(next_node.inputs) != (value,):
        return None, ()
    return linear_activation(kernel, next_kernel, dict(next_node.attrs), activation), ()


_EPILOGUES = {"cpu": _epilogue, "cuda": _cuda_epilogue}  # the devices a plain run takes


def _matmul_plus(matmul_kernel, add_kernel, add_attrs: dict, other: int):
    """The kernel of a matmul and the bias add after it: the bias added into the matmul's new
    output in place (the bits of the add, which gives the same sum in either order)."""
    def kernel(xp, a, b, bias):
        y = matmul_kernel(xp, a, b)
        if (type(y) is np.ndarray and y.dtype == np.float32 and y.flags.writeable
                and not any(np.may_share_memory(y, operand) for operand in (a, b, bias))):
            return np.add(y, bias, out=y)
        return add_kernel(xp, *((y, bias) if other == 1 else (bias, y)), **add_attrs)

    kernel.activation = "bias"  # what the step runs after its matmul
    return kernel


def _conv_plus(conv_kernel, add_kernel, add_attrs: dict, other: int, relu: bool):
    """The kernel of a conv and the residual add (then ReLU) after it, called with the conv's
    arrays and the residual last."""
    def kernel(xp, *arrays, stride, padding, dilation, groups):
        *conv_arrays, residual = arrays
        x, w, b = (list(conv_arrays) + [None])[:3]
        y = conv_forward_residual(xp, x, w, b, residual, stride, padding, dilation, groups, relu)
        if y is None:  # the kernels one after the other
            y = conv_kernel(xp, *conv_arrays, stride=stride, padding=padding, dilation=dilation, groups=groups)
            y = add_kernel(xp, *((y, residual) if other == 1 else (residual, y)), **add_attrs)
        return y

    kernel.activation = "add, relu" if relu else "add"  # what the step runs after its conv
    return kernel


def _conv_then(conv_kernel, act_kernel, act_attrs: dict, activation: str):
    def kernel(xp, x, w, b=None, *, stride, padding, dilation, groups):
        y = conv_forward_activation(xp, x, w, b, stride, padding, dilation, groups, activation)
        if y is None:  # the two kernels one after the other
            y = act_kernel(xp, conv_kernel(xp, x, w, b, stride=stride, padding=padding, dilation=dilation,
                                           groups=groups), **act_attrs)
        return y

    kernel.activation = activation  # what the step runs after its conv, for tests and readers
    return kernel
