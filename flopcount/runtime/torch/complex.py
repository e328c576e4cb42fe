"""Complex values of a captured graph lowered to real tensors, before conversion.

The runtime has no complex dtype. A model that makes complex values on the way (rotary
embeddings written with ``torch.polar`` and ``view_as_complex``, as DeepSeek-V2 and Llama 4 do)
is rewritten, FX graph to FX graph, so that every complex tensor of shape S and dtype complex64
is a real tensor of shape S + (2,) and dtype float32: real and imaginary parts side by side,
the layout ``torch.view_as_real`` gives. Then:

* ``view_as_complex`` and ``view_as_real`` move no data: the value is the same in both layouts;
* ``polar(abs, angle)`` is ``stack([abs·cos(angle), abs·sin(angle)], -1)``;
* a product of two complex tensors is ``flopcount::complex_mul`` (the runtime's
  ``complex_mul``: 4 real multiplies and 2 adds per element); with a real tensor or number it
  is a real ``mul`` broadcast over both parts, as are ``div`` by a real value, ``add`` and
  ``sub`` of complex tensors and ``neg``; a real operand of a complex ``add``/``sub`` gets a
  zero imaginary part; ``a / b`` of complex tensors is ``a·conj(b) / |b|²``;
* shape ops keep their meaning with one dim more at the end: sizes get a trailing 2 (``view``,
  ``expand``), and a negative dim moves one further from the end (``unsqueeze(z, -1)`` is
  ``unsqueeze(r, -2)``).

Each rewritten node's recorded value is recomputed by running its op on meta tensors, and
checked against the complex value it replaces. An op on complex values outside these rules is
refused, naming it. The graph's other nodes are copied unchanged; nodes the outputs do not need
are left out, as the importer leaves them out.

    captured = lower(captured)   # only when has_complex(captured)
"""

from __future__ import annotations

import operator
from dataclasses import replace

from ..errors import ShapeError, UnsupportedOpError
from .converters import packet_name
from .fx_walk import needed_nodes

_COMPLEX_MUL = None


def _complex_mul_op():
    """``torch.ops.flopcount.complex_mul``: a·b (or a·conj(b)) of complex tensors in the real
    layout, defined once, so the lowered graph is still a torch program that runs."""
    global _COMPLEX_MUL
    if _COMPLEX_MUL is None:
        import torch

        @torch.library.custom_op("flopcount::complex_mul", mutates_args=(),
                                 schema="(Tensor a, Tensor b, bool conjugate=False) -> Tensor")
        def complex_mul(a, b, conjugate=False):
            ar, ai = a.unbind(-1)
            br, bi = b.unbind(-1)
            if conjugate:
                bi = -bi
            return torch.stack([ar * br - ai * bi, ar * bi + ai * br], -1)

        @complex_mul.register_fake
        def _(a, b, conjugate=False):
            shape = torch.broadcast_shapes(a.shape[:-1], b.shape[:-1]) + (2,)
            return a.new_empty(shape, dtype=torch.promote_types(a.dtype, b.dtype))

        _COMPLEX_MUL = torch.ops.flopcount.complex_mul.default
    return _COMPLEX_MUL


def _is_complex(val) -> bool:
    if isinstance(val, (list, tuple)):
        return any(_is_complex(v) for v in val)
    return getattr(getattr(val, "dtype", None), "is_complex", False)


def has_complex(captured) -> bool:
    """Whether any value of the captured graph (or a parameter or buffer) is complex."""
    return any(_is_complex(node.meta.get("val")) for node in captured.graph.nodes)


def _real_dtype(dtype):
    import torch

    return {torch.complex64: torch.float32, torch.complex128: torch.float64,
            torch.complex32: torch.float16}[dtype]


def _meta(val):
    """A plain meta tensor standing for a recorded value (a FakeTensor, a meta or real tensor)."""
    import torch

    if isinstance(val, (list, tuple)):
        return type(val)(_meta(v) for v in val)
    if isinstance(val, torch.Tensor):
        return torch.empty(tuple(int(d) for d in val.shape), dtype=val.dtype, device="meta")
    return val


def _dim(d: int) -> int:
    """A dim of a complex tensor as a dim of its real layout: a negative one moves past the
    trailing (real, imaginary) dim."""
    return d - 1 if d < 0 else d


class _Lowering:
    """Copies the needed nodes of a graph into a new one, rewriting those that touch complex values."""

    def __init__(self, graph, needed: set):
        import torch

        self.torch = torch
        self.aten = torch.ops.aten
        self.old = graph
        self.needed = needed
        self.new = torch.fx.Graph()
        self.env: dict = {}        # old node -> new node
        self.complex: set = set()  # new nodes holding a complex value in the real layout
        self.node = None           # the old node being rewritten (its name and module scope)
        self.count = 0

    # --- building -------------------------------------------------------------------------------
    def emit(self, target, *args, is_complex: bool = False, **kwargs):
        """A new node calling ``target``, its value computed on meta tensors."""
        torch = self.torch
        self.count += 1
        node = self.new.create_node("call_function", target, args, kwargs,
                                    name=f"{self.node.name}__real{self.count}")
        meta_args = torch.fx.node.map_arg((args, kwargs), lambda n: _meta(n.meta["val"]))
        node.meta["val"] = target(*meta_args[0], **meta_args[1])
        for key in ("nn_module_stack", "stack_trace"):
            if key in self.node.meta:
                node.meta[key] = self.node.meta[key]
        if is_complex:
            self.complex.add(node)
        return node

    def is_complex(self, value) -> bool:
        return isinstance(value, self.torch.fx.Node) and value in self.complex

    def as_complex(self, value, like):
        """A real tensor node or Python number as a complex value of ``like``'s real dtype (a
        zero imaginary part; a Python complex number keeps its own)."""
        if self.is_complex(value):
            return value
        aten = self.aten
        if isinstance(value, self.torch.fx.Node):
            widened = self.emit(aten.unsqueeze.default, value, -1)
            return self.emit(aten.constant_pad_nd.default, widened, [0, 1], 0.0, is_complex=True)
        number = complex(value)
        dtype = like.meta["val"].dtype
        parts = [self.emit(aten.scalar_tensor.default, part, dtype=dtype) for part in (number.real, number.imag)]
        return self.emit(aten.stack.default, parts, 0, is_complex=True)

    # --- the walk -------------------------------------------------------------------------------
    def run(self, outputs: list):
        torch = self.torch
        for node in self.old.nodes:
            if node.op == "placeholder":
                copy = self.new.node_copy(node)
                self.env[node] = copy
                if _is_complex(node.meta.get("val")):
                    copy.meta["val"] = self.torch.view_as_real(_meta(node.meta["val"]))
                    self.complex.add(copy)
            elif node.op in ("call_function", "get_attr") and node.name in self.needed:
                self.env[node] = self._lower(node)
        lowered = [self.env[o] if isinstance(o, torch.fx.Node) else o for o in outputs]
        self.new.output(tuple(lowered))
        return lowered

    def _lower(self, node):
        torch = self.torch
        args = torch.fx.node.map_arg(node.args, lambda n: self.env[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: self.env[n])
        touches = _is_complex(node.meta.get("val")) or any(self.is_complex(n) for n in _nodes((args, kwargs)))
        if not touches:
            return self.new.node_copy(node, lambda n: self.env[n])
        name = "getitem" if node.target is operator.getitem else packet_name(node.target)
        rule = _RULES.get(name)
        if rule is None:
            supported = ", ".join(sorted(_RULES))
            raise UnsupportedOpError(f"{node.target} (node {node.name!r}) on a complex value: flopcount holds "
                                     f"complex values as real (real, imaginary) pairs and lowers only {supported}")
        self.node = node
        result = rule(self, node, *args, **kwargs)
        self._check(node, result)
        return result

    def _check(self, node, result) -> None:
        """The lowered value has the complex value's shape with a trailing 2, and its real dtype."""
        want, got = node.meta.get("val"), result.meta.get("val")
        if not hasattr(want, "dtype") or not hasattr(got, "dtype"):
            return
        shape, dtype = tuple(want.shape), want.dtype
        if want.dtype.is_complex:
            shape, dtype = shape + (2,), _real_dtype(want.dtype)
        if tuple(got.shape) != shape or got.dtype != dtype:
            raise ShapeError(f"{node.target} (node {node.name!r}): its complex value lowered to "
                                     f"{got.dtype}{list(got.shape)}, expected {dtype}{shape}")


def _nodes(value) -> list:
    import torch

    found = []
    torch.fx.node.map_arg(value, lambda n: found.append(n) or n)
    return found


# --- rules: (lowering, old node, *new args, **new kwargs) -> the new node ---------------------------

def _same(L, node, *args, is_complex=True, **kwargs):
    return L.emit(node.target, *args, is_complex=is_complex, **kwargs)


def _identity(L, node, self, *args, **kwargs):
    return self


def _view_as_complex(L, node, self):
    # a distinct node: the real input may have other, real, users
    return L.emit(L.aten.alias.default, self, is_complex=True)


def _view_as_real(L, node, self):
    return L.emit(L.aten.alias.default, self)


def _polar(L, node, abs, angle):
    aten = L.aten
    real = L.emit(aten.mul.Tensor, abs, L.emit(aten.cos.default, angle))
    imag = L.emit(aten.mul.Tensor, abs, L.emit(aten.sin.default, angle))
    return L.emit(aten.stack.default, [real, imag], -1, is_complex=True)


def _complex(L, node, real, imag):
    return L.emit(L.aten.stack.default, [real, imag], -1, is_complex=True)


def _part(index: int):
    def part(L, node, self):
        return L.emit(L.aten.select.int, self, -1, index)

    return part


def _complexish(L, value) -> bool:
    """A complex tensor, or a Python complex number with an imaginary part."""
    return L.is_complex(value) or (isinstance(value, complex) and value.imag != 0)


def _real(value):
    """A real operand: a tensor node as it is, a number without its (zero) imaginary part."""
    return value.real if isinstance(value, complex) else value


def _mul(L, node, self, other):
    aten = L.aten
    like = self if isinstance(self, L.torch.fx.Node) else other
    if _complexish(L, self) and _complexish(L, other):
        return L.emit(_complex_mul_op(), L.as_complex(self, like), L.as_complex(other, like), is_complex=True)
    z, w = (self, other) if _complexish(L, self) else (other, self)
    z = L.as_complex(z, like)
    if isinstance(w, L.torch.fx.Node):   # a real tensor scales both parts
        w = L.emit(aten.unsqueeze.default, w, -1)
    return L.emit(aten.mul.Tensor, z, _real(w), is_complex=True)


def _div(L, node, self, other, rounding_mode=None):
    aten = L.aten
    if rounding_mode is not None:
        raise UnsupportedOpError(f"{node.target} (node {node.name!r}): a rounding division of complex values")
    like = self if isinstance(self, L.torch.fx.Node) else other
    if not _complexish(L, other):   # by a real value: both parts divided
        if isinstance(other, L.torch.fx.Node):
            other = L.emit(aten.unsqueeze.default, other, -1)
        return L.emit(aten.div.Tensor, L.as_complex(self, like), _real(other), is_complex=True)
    # a / b = a·conj(b) / |b|²
    other = L.as_complex(other, like)
    numerator = L.emit(_complex_mul_op(), L.as_complex(self, like), other, True, is_complex=True)
    squared = L.emit(aten.sum.dim_IntList, L.emit(aten.mul.Tensor, other, other), [-1], True)
    return L.emit(aten.div.Tensor, numerator, squared, is_complex=True)


def _add_or_sub(L, node, self, other, alpha=1):
    like = self if L.is_complex(self) else other
    kwargs = {} if alpha == 1 else {"alpha": alpha}
    return L.emit(node.target, L.as_complex(self, like), L.as_complex(other, like), is_complex=True, **kwargs)


def _conj(L, node, self):
    aten = L.aten
    real, imag = (L.emit(aten.select.int, self, -1, i) for i in (0, 1))
    return L.emit(aten.stack.default, [real, L.emit(aten.neg.default, imag)], -1, is_complex=True)


def _abs(L, node, self):
    aten = L.aten
    squares = L.emit(aten.sum.dim_IntList, L.emit(aten.mul.Tensor, self, self), [-1])
    return L.emit(aten.sqrt.default, squares)


def _to_copy(L, node, self, *args, dtype=None, **kwargs):
    if dtype is None:   # a move to another device: nothing changes in a graph
        return self
    if dtype.is_complex:
        return L.emit(node.target, L.as_complex(self, self), *args, dtype=_real_dtype(dtype), is_complex=True,
                      **kwargs)
    if L.is_complex(self):   # to a real dtype: torch keeps the real part
        self = L.emit(L.aten.select.int, self, -1, 0)
    return L.emit(node.target, self, *args, dtype=dtype, **kwargs)


def _shifted(L, node, self, dim=0, *rest, **kwargs):
    """An op whose second argument is one dim (unsqueeze, select, slice, split, unbind...)."""
    return _same(L, node, self, _dim(dim), *rest, **kwargs)


def _squeeze(L, node, self, dim=None):
    if dim is None:
        return _same(L, node, self)
    return _same(L, node, self, [_dim(d) for d in dim] if isinstance(dim, (list, tuple)) else _dim(dim))


def _sized(L, node, self, size, *rest, **kwargs):
    """view, reshape, expand: the size gets the trailing 2."""
    return _same(L, node, self, list(size) + [2], *rest, **kwargs)


def _permute(L, node, self, dims):
    n = self.meta["val"].dim() - 1
    return _same(L, node, self, [d % n for d in dims] + [n])


def _transpose(L, node, self, dim0, dim1):
    return _same(L, node, self, _dim(dim0), _dim(dim1))


def _t(L, node, self):
    return self if self.meta["val"].dim() < 3 else L.emit(L.aten.transpose.int, self, 0, 1, is_complex=True)


def _index(L, node, self, indices):
    return _same(L, node, self, indices)   # the indices address the leading dims only


def _repeat(L, node, self, repeats):
    return _same(L, node, self, list(repeats) + [1])


def _flip(L, node, self, dims):
    return _same(L, node, self, [_dim(d) for d in dims])


def _roll(L, node, self, shifts, dims=()):
    if not dims:
        raise UnsupportedOpError(f"{node.target} (node {node.name!r}): rolling a flattened complex tensor")
    return _same(L, node, self, shifts, [_dim(d) for d in dims])


def _joined(L, node, tensors, dim=0):
    """cat and stack: every operand complex."""
    like = next(t for t in tensors if L.is_complex(t))
    return _same(L, node, [L.as_complex(t, like) for t in tensors], _dim(dim))


def _reduced(L, node, self, dim=None, *rest, **kwargs):
    """sum / mean over complex values: over each part (the dims named, or every dim but the
    last when none are)."""
    n = self.meta["val"].dim() - 1
    dims = list(range(n)) if not dim else [_dim(d) for d in dim]
    target = L.aten.sum.dim_IntList if node.target == L.aten.sum.default else node.target
    return L.emit(target, self, dims, *rest, is_complex=True, **kwargs)


def _copy(L, node, self, src, *rest):
    return _same(L, node, L.as_complex(self, src), L.as_complex(src, self), *rest)


def _getitem(L, node, source, index):
    return L.emit(operator.getitem, source, index, is_complex=L.is_complex(source))


_RULES = {
    "aten.view_as_complex": _view_as_complex, "aten.view_as_real": _view_as_real,
    "aten.polar": _polar, "aten.complex": _complex, "aten.real": _part(0), "aten.imag": _part(1),
    "aten.mul": _mul, "aten.div": _div, "aten.add": _add_or_sub, "aten.sub": _add_or_sub,
    "aten.neg": lambda L, node, self: _same(L, node, self),
    "aten._conj": _conj, "aten.conj": _conj, "aten.conj_physical": _conj, "aten.abs": _abs,
    "aten._to_copy": _to_copy,
    "aten.clone": _identity, "aten.alias": _identity, "aten.detach": _identity, "aten.lift_fresh": _identity,
    "aten.contiguous": _identity, "aten.resolve_conj": _identity, "aten.resolve_neg": _identity,
    "aten.unsqueeze": _shifted, "aten.select": _shifted, "aten.slice": _shifted, "aten.split": _shifted,
    "aten.split_with_sizes": _shifted, "aten.unbind": _shifted, "aten.narrow": _shifted,
    "aten.squeeze": _squeeze, "aten.view": _sized, "aten._unsafe_view": _sized, "aten.reshape": _sized,
    "aten.expand": _sized, "aten.permute": _permute, "aten.transpose": _transpose, "aten.t": _t,
    "aten.index": _index, "aten.repeat": _repeat, "aten.flip": _flip, "aten.roll": _roll,
    "aten.cat": _joined, "aten.stack": _joined, "aten.sum": _reduced, "aten.mean": _reduced,
    "aten.copy": _copy, "getitem": _getitem,
}


def lower(captured):
    """``captured`` with its complex values held as real tensors (a new FX graph; the
    captured graph is left as it was). Complex parameters and buffers become their
    ``view_as_real`` views; a complex model input is refused; a complex model output is
    returned in its real layout, and a note says so."""
    import torch

    placeholders = {n.name: n for n in captured.graph.nodes if n.op == "placeholder"}
    for name in captured.inputs:
        if _is_complex(placeholders[name].meta.get("val")):
            raise UnsupportedOpError(f"input {name!r} is complex; flopcount takes real inputs (pass "
                                     f"torch.view_as_real(x) and view_as_complex inside the model)")
    lowering = _Lowering(captured.graph, needed_nodes(captured.graph, captured.outputs))
    outputs = lowering.run(list(captured.outputs))
    params = {}
    for name, (target, tensor, kind) in captured.params.items():
        if tensor.is_complex():
            tensor = torch.view_as_real(tensor.resolve_conj())
        params[name] = (target, tensor, kind)
    notes = list(captured.notes)
    complex_outputs = [i for i, o in enumerate(outputs) if lowering.is_complex(o)]
    if complex_outputs:
        notes.append(f"output(s) {complex_outputs} are complex: returned as real tensors with a trailing "
                     f"(real, imaginary) dim, as torch.view_as_real gives them")
    return replace(captured, graph=lowering.new, params=params, outputs=outputs, notes=notes)


__all__ = ["has_complex", "lower"]
