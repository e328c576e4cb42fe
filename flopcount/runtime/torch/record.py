"""The capture of last resort: record the ATen ops of one eager run of a PyTorch model.

``torch.export`` refuses models whose Python code reads tensor values (``if x.sum() > 0``,
``.item()``, ``.tolist()``). Such a model still runs, and a ``TorchDispatchMode`` sees every
ATen op it makes, with its real inputs and outputs; module hooks say which module is running.
The ops are written into an FX graph in the form ``torch.export`` gives (placeholders for
parameters, buffers and inputs, ``call_function`` nodes with ``val`` and ``nn_module_stack``
metadata), so the importer treats both captures alike. The graph is specialized to the
example's values: the branches taken are the ones this run took.

A fused attention (``scaled_dot_product_attention``) is recorded as one op
(``fused_attention.py``), not as the math torch decomposes it into.

In-place ops are recorded as their out-of-place form (``relu_`` as ``relu``), the written
tensor then standing for the result. An in-place write into a view of another tensor
(``keys[..., :n].copy_(k)``, ``out[:, :, i] = x``) is recorded the same way on the view, and the
viewed tensor then stands for a ``slice_scatter`` (or ``select_scatter``) of the new view into
it; a view that is not a block of slices or one index of its base is refused, naming the op.
"""

from __future__ import annotations

import operator

from ..errors import UnsupportedOpError
from .captured import Captured
from .fused_attention import whole_attention
from .importer import class_name


def _in_place(func) -> bool:
    return func._schema.is_mutable and func.overloadpacket.__name__.endswith("_")


def _functional(func):
    """The out-of-place overload of an in-place ATen op (``aten.add_.Tensor`` ->
    ``aten.add.Tensor``), or ``func`` itself when it has none (``bernoulli_.float``: the
    importer's fallback op then runs it on a copy)."""
    import torch

    if not _in_place(func):
        return func
    packet = getattr(torch.ops.aten, func.overloadpacket.__name__[:-1], None)
    return getattr(packet, func._overloadname, func) if packet is not None else func


def _view_position(view):
    """Where ``view`` sits in its base, as the scatters that put a new value of it back: a list
    of ("slice", dim, start, stop) (a block of slices along some dims, outermost first) or one
    ("select", dim, index); None when it is neither (a transpose, a strided or reshaped view)."""
    base = view._base
    if view.dtype != base.dtype:
        return None
    sizes, strides = tuple(base.shape), base.stride()
    offset = view.storage_offset() - base.storage_offset()
    if view.ndim == base.ndim and view.stride() == strides:
        cuts = []
        for d in sorted((d for d in range(base.ndim) if strides[d]), key=lambda d: -strides[d]):
            start, offset = divmod(offset, strides[d])
            if view.shape[d] == sizes[d] and start == 0:
                continue
            if start + view.shape[d] > sizes[d]:
                return None
            cuts.append(("slice", d, start, start + view.shape[d]))
        if offset:
            return None
        return sorted(cuts, key=lambda cut: cut[1]) or [("slice", 0, 0, sizes[0] if sizes else 0)]
    if view.ndim == base.ndim - 1:
        for d in range(base.ndim):
            if (tuple(view.shape) == sizes[:d] + sizes[d + 1:] and view.stride() == strides[:d] + strides[d + 1:]
                    and strides[d] and offset % strides[d] == 0 and 0 <= offset // strides[d] < sizes[d]):
                return [("select", d, offset // strides[d])]
    return None


class _Recorder:
    def __init__(self, module):
        import torch

        self.torch = torch
        self.graph = torch.fx.Graph()
        self.nodes: dict = {}        # id(tensor) -> fx.Node standing for its current value
        self.alive: list = []        # every tensor seen, so no id is reused during the run
        self.params: dict = {}
        self.stack: list = []        # (path, class) of the modules running now
        self.paths = {id(m): path for path, m in module.named_modules()}
        self.types = {path: class_name(type(m)) for path, m in module.named_modules()}
        for kind, named in (("param", module.named_parameters()), ("buffer", module.named_buffers())):
            for name, t in named:
                if id(t) not in self.nodes:
                    self._placeholder(f"{'p' if kind == 'param' else 'b'}_{name.replace('.', '_')}", t,
                                      (name, t, kind))

    def _placeholder(self, name: str, t, param=None):
        node = self.graph.placeholder(name)
        node.meta["val"] = t.detach().to("meta")
        self.nodes[id(t)] = node
        self.alive.append(t)
        if param is not None:
            self.params[node.name] = param
        return node

    def node_of(self, t):
        node = self.nodes.get(id(t))
        if node is None:  # a tensor made outside the recorded run: a constant of the graph
            node = self._placeholder(f"c_{len(self.params)}", t, (f"constant_{len(self.params)}", t, "const"))
        return node

    # --- module scopes ---------------------------------------------------------------------------
    def enter(self, module, *_):
        path = self.paths.get(id(module))
        if path:
            self.stack.append((path, type(module)))

    def leave(self, module, *_):
        if self.stack and self.paths.get(id(module)) == self.stack[-1][0]:
            self.stack.pop()

    # --- ops --------------------------------------------------------------------------------------
    def op(self, func, args, kwargs, out):
        torch = self.torch
        target = _functional(func)
        mutated = _in_place(func)
        viewed = args[0]._base if mutated and args and getattr(args[0], "_base", None) is not None else None
        where = _view_position(args[0]) if viewed is not None else None
        if viewed is not None and where is None:
            raise UnsupportedOpError(f"{func} writes into a view of another tensor that is not a block of slices "
                                     f"or one index of it; a recorded graph cannot follow that write")

        def arg(a):
            return self.node_of(a) if isinstance(a, torch.Tensor) else a

        fx_args = torch.utils._pytree.tree_map(arg, args)
        fx_kwargs = torch.utils._pytree.tree_map(arg, kwargs)
        node = self.graph.call_function(target, tuple(fx_args), dict(fx_kwargs))
        node.meta["val"] = torch.utils._pytree.tree_map(
            lambda t: t.detach().to("meta") if isinstance(t, torch.Tensor) else t, out)
        node.meta["nn_module_stack"] = {f"m{i}": entry for i, entry in enumerate(self.stack)}
        if isinstance(out, (tuple, list)):
            for i, t in enumerate(out):
                if isinstance(t, torch.Tensor):
                    item = self.graph.call_function(operator.getitem, (node, i))
                    item.meta["val"] = t.detach().to("meta")
                    self.nodes[id(t)] = item
                    self.alive.append(t)
        elif isinstance(out, torch.Tensor):
            self.nodes[id(out)] = node
            self.alive.append(out)
        if mutated:  # the written tensor now holds the result
            self.nodes[id(args[0])] = self.nodes.get(id(out), node)
        if where is not None:  # and the tensor it is a view of holds the result in its place
            self.nodes[id(viewed)] = self._put_back(self.node_of(viewed), viewed, where, self.nodes[id(args[0])],
                                                    node.meta["nn_module_stack"])

    def _put_back(self, base_node, base, cuts: list, value, stack):
        """``base`` with ``value`` written where ``cuts`` (``_view_position``) say: one scatter
        per cut, the inner ones into slices of the outer."""
        torch = self.torch
        kind, dim, *position = cuts[0]
        if len(cuts) > 1:   # first the value into this slice of the base, then the slice into the base
            part = base.narrow(dim, position[0], position[1] - position[0])
            part_node = self._call(torch.ops.aten.slice.Tensor, (base_node, dim, position[0], position[1]), part, stack)
            value = self._put_back(part_node, part, cuts[1:], value, stack)
        scatter = torch.ops.aten.slice_scatter.default if kind == "slice" else torch.ops.aten.select_scatter.default
        return self._call(scatter, (base_node, value, dim, *position), base, stack)

    def _call(self, target, args: tuple, like, stack):
        node = self.graph.call_function(target, args)
        node.meta["val"] = like.detach().to("meta")
        node.meta["nn_module_stack"] = stack
        return node


def record(module, args: tuple, kwargs: dict, *, state: dict | None = None, state_after=None,
           call=None) -> Captured:
    """The Captured ATen graph of one run of ``module(*args, **kwargs)`` (or of ``call()``, a
    function that runs ``module``: its tensor results are the graph's outputs).

    ``state`` names tensors the run reads that are neither parameters nor arguments (a KV cache
    held in an object): each becomes a graph input of that name, after the arguments.
    ``state_after()``, called once the run is over, names the tensors the state holds then: they
    become graph outputs after the run's own, and ``Captured.state_outputs`` lists their names.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from .importer import spec_of

    recorder = _Recorder(module)
    flat, _ = torch.utils._pytree.tree_flatten((args, kwargs))
    placeholders = [recorder._placeholder(f"input_{i}", t)
                    for i, t in enumerate(x for x in flat if isinstance(x, torch.Tensor))]
    for name, t in (state or {}).items():
        if id(t) in recorder.nodes:
            raise UnsupportedOpError(f"state tensor {name!r} is also a parameter or an argument of the model")
        placeholders.append(recorder._placeholder(name, t))

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, a=(), kw=None):
            kw = kw or {}
            out = func(*a, **kw)
            recorder.op(func, a, kw, out)
            return out

    saved = {name: b.detach().clone() for name, b in module.named_buffers()}
    hooks = (torch.nn.modules.module.register_module_forward_pre_hook(recorder.enter),
             torch.nn.modules.module.register_module_forward_hook(recorder.leave))
    grad = torch.enable_grad() if module.training else torch.no_grad()
    try:
        with grad, whole_attention(), Mode():
            result = module(*args, **kwargs) if call is None else call()
    finally:
        for handle in hooks:
            handle.remove()
        with torch.no_grad():  # a training-mode run updates batch-norm statistics: undo it
            for name, b in module.named_buffers():
                if name in saved:
                    b.copy_(saved[name])
    leaves, _ = torch.utils._pytree.tree_flatten(result)
    outputs = [recorder.node_of(t) for t in leaves if isinstance(t, torch.Tensor)]
    after = dict(state_after()) if state_after is not None else {}
    outputs += [recorder.node_of(t) for t in after.values()]
    return Captured(recorder.graph, recorder.params, [p.name for p in placeholders],
                    [spec_of(p.meta["val"]) for p in placeholders], outputs, type(module).__name__,
                    recorder.types, how="recorded", state_outputs=list(after))


__all__ = ["record"]
