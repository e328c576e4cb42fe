"""``opaque``: a node of an imported model file that the runtime has no op for.

It keeps the node's place in the graph so the rest of the file can be counted: its output
shapes and dtypes are those the file states (or shape inference gives), it has no kernel (running
it raises an UnsupportedOpError naming the node) and it is not priced (``Op.priced``), so reports
count it as zero and list it as unsupported under its ``label`` (``ONNX TopK``) with the node's name.
"""

from __future__ import annotations

__all__ = ["opaque"]

from .. import dtypes as _dt
from ..dispatch import apply
from ..errors import UnsupportedOpError
from ..registry import Op, Spec, no_cost, register_op


@register_op("opaque")
class Opaque(Op):
    def shape(*inputs, label, node, outputs):
        device = next((t.device for t in inputs if t is not None), None)
        if device is None:
            from ..dispatch import state

            device = state.default_device
        specs = tuple(Spec(tuple(shape), _dt.get_dtype(dtype), device) for shape, dtype in outputs)
        return specs if len(specs) > 1 else specs[0]

    def forward(xp, *inputs, label, node, outputs):
        raise UnsupportedOpError(f"{label} node {node!r} cannot run: flopcount has no kernel for {label} "
                                 f"(it is counted as zero and listed as unsupported)")

    vjp = None   # no kernel, so nothing to differentiate
    priced = False  # the work of an op nobody defined is unknown: reports list it as unsupported
    cost = no_cost   # and it moves no bytes anyone can name

    @staticmethod
    def unsupported_label(attrs: dict) -> str:
        """The name reports list the node under: the op type it stands for."""
        return attrs["label"]


def opaque(*inputs, label: str, node: str, outputs: list):
    """A node with the given output (shape, dtype name) pairs and no kernel.

    >>> y = opaque(rt.ones(2), label="ONNX Foo", node="foo", outputs=[((3,), "float32")])
    >>> y.shape
    (3,)
    """
    return apply(Opaque, *inputs, label=label, node=node, outputs=[(tuple(s), d) for s, d in outputs])
