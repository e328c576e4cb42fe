"""Reverse-mode autograd over a tape of nodes (micrograd's shape, PyTorch's semantics).

Each op's ``vjp`` is written with registered ops, so the backward pass is dispatched, observed,
counted and timed like the forward pass, on the meta device too.
"""

from __future__ import annotations

from .dispatch import state


class Node:
    """One recorded op: its inputs and outputs, attrs, and the module that ran it."""

    __slots__ = ("op", "inputs", "attrs", "outputs", "module", "released")

    def __init__(self, op, inputs, attrs, outputs, module):
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.outputs = outputs
        self.module = module
        self.released = False

    def release(self) -> None:
        """Drop references so the tape's memory goes once the gradient has been taken."""
        self.inputs = self.outputs = ()
        self.released = True

    def __repr__(self) -> str:
        return f"<Node {self.op.name}>"


def record_node(op, inputs, attrs, outputs) -> None:
    stack = state.scope_stack
    module = state.backward_module if state.phase == "backward" else (stack[-1] if stack else None)
    node = Node(op, inputs, attrs, outputs, module)
    for out in outputs:
        if out.dtype.is_floating_point:
            out.requires_grad = True
            out._node = node


def _topological_order(root_node) -> list:
    order, seen = [], set()
    stack = [(root_node, False)]
    while stack:  # iterative: deep models would overflow Python's recursion limit
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for t in node.inputs:
            if t is not None and t._node is not None and id(t._node) not in seen:
                stack.append((t._node, False))
    return order


def unbroadcast(grad, shape: tuple):
    """Sum a gradient over the axes that broadcasting added or stretched, back to ``shape``."""
    if grad.shape == shape:
        return grad
    from .ops.reduction import sum as reduce_sum
    from .ops.movement import reshape

    lead = len(grad.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1)
    if axes:
        grad = reduce_sum(grad, dim=axes, keepdim=False)
    return reshape(grad, shape) if grad.shape != shape else grad


def backward(root, grad=None, retain_graph: bool = False, create_graph: bool = False) -> None:
    """Accumulate d(root)/d(leaf) into every leaf's ``.grad`` (``root.backward()``)."""
    from .factories import ones_like
    from .ops.elementwise import add

    if not root.requires_grad:
        raise RuntimeError("backward(): the tensor does not require grad and has no grad_fn")
    if grad is None:
        if root.numel() != 1:
            raise RuntimeError(f"backward(): grad can be implicitly created only for scalar outputs, "
                               f"got shape {tuple(root.shape)}")
        grad = ones_like(root)
    if root._node is None:  # a leaf: its gradient is the seed itself
        root.grad = grad if root.grad is None else add(root.grad, grad)
        return

    retain_graph = retain_graph or create_graph  # as PyTorch: a graph of the gradient keeps the graph
    grads = {id(root): grad}
    previous = (state.phase, state.grad_enabled, state.backward_module)
    state.phase, state.grad_enabled = "backward", create_graph
    try:
        for node in reversed(_topological_order(root._node)):
            if node.released:
                raise RuntimeError(f"backward(): trying to backward through the graph a second time "
                                   f"(op '{node.op.name}' has freed its saved tensors); pass "
                                   f"retain_graph=True to the first backward")
            outs = node.outputs
            gouts = [grads.pop(id(o), None) for o in outs]
            if all(g is None for g in gouts):
                continue
            state.backward_module = node.module
            if len(outs) == 1:
                g_arg = gouts[0]
            else:
                # a boolean output (a dropout mask) has no gradient: its slot holds None rather
                # than zeros of its shape, which for a large attention's mask are gigabytes
                g_arg = tuple(g if g is not None else (ones_like(o, fill=0) if o.dtype.is_floating_point else None)
                              for g, o in zip(gouts, outs))
            out_arg = outs[0] if len(outs) == 1 else outs
            gins = node.op.vjp(g_arg, out_arg, *node.inputs, **node.attrs)
            if not isinstance(gins, tuple):
                gins = (gins,)
            for inp, gi in zip(node.inputs, gins):
                if gi is None or inp is None or not inp.requires_grad:
                    continue
                gi = unbroadcast(gi, inp.shape)
                if inp._node is None:
                    inp.grad = gi if inp.grad is None else add(inp.grad, gi)
                else:
                    held = grads.get(id(inp))
                    grads[id(inp)] = gi if held is None else add(held, gi)
            if not retain_graph:
                node.release()
    finally:
        state.phase, state.grad_enabled, state.backward_module = previous
