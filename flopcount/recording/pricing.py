"""One pricing path for both views: what an op costs under a convention, the record a report
keeps of it, and the list of ops the convention has no rule for.

The eager view prices the events it recorded, the graph view its nodes and the backward ops a
training step dispatches through the executor; all of them come here as :class:`OpCall`\\ s
(or anything with the same four attributes, such as a recorded ``Event``), so an op is priced
and described the same way whichever view saw it.

    calls = [OpCall(node.op, node.output_specs(), specs, node.attrs) for node in graph.nodes]
    costs, owns = price(calls, conventions.get("flopcount"))
"""

from __future__ import annotations

from collections import Counter, namedtuple

from ..report.model import OpRecord, Unsupported
from ..runtime.registry import Cost

OpCall = namedtuple("OpCall", ("op", "output_spec", "inputs", "attrs"))
OpCall.__doc__ = """One application of an op, as specs: ``output_spec`` is one Spec, or a tuple of
them for an op with several outputs; ``inputs`` holds None for an absent optional input."""


def own_costs(calls) -> list:
    """Each call's Cost under its op's own rule (every registered op has one)."""
    return [c.op.cost(c.output_spec, *c.inputs, **c.attrs) for c in calls]


def price(calls, convention) -> tuple:
    """(cost under ``convention``, or None where it has no rule; the op's own Cost) of every
    call, as two lists. Bytes read and written always come from the op's own rule."""
    owns = own_costs(calls)
    return convention.op_costs(calls, owns), owns


def macs_flops(cost: Cost | None) -> Cost:
    """The arithmetic of a priced op (zero where the convention has no rule)."""
    return Cost() if cost is None else Cost(cost.macs, cost.flops)


def _described(specs) -> tuple:
    """((shape, ...), (dtype name, ...)) of an op's input or output specs (None for an absent input)."""
    shapes, dtypes = [], []
    for s in specs:
        if s is None:
            shapes.append(None)
            dtypes.append(None)
        else:
            shapes.append(tuple(s.shape))
            dtypes.append(s.dtype.name)
    return tuple(shapes), tuple(dtypes)


def op_record(call, cost: Cost | None, own: Cost, *, name: str, scope: str, phase: str, counted: bool,
              params: int = 0, param_bytes: int = 0, latency_ms: float | None = None,
              start_ms: float | None = None, source: str | None = None, mac_dtype: str | None = None) -> OpRecord:
    """The report's record of one priced op: shapes and dtypes from its specs, arithmetic from
    ``cost`` (0 where the convention has no rule), bytes from ``own``; ``mac_dtype`` is the
    dtype its MACs run in."""
    outputs = call.output_spec if isinstance(call.output_spec, tuple) else (call.output_spec,)
    input_shapes, input_dtypes = _described(call.inputs)
    output_shapes, output_dtypes = _described(outputs)
    return OpRecord(name=name, op=call.op.name, scope=scope, phase=phase,
                    macs=cost.macs if cost is not None else 0, flops=cost.flops if cost is not None else 0,
                    bytes_read=own.bytes_read, bytes_written=own.bytes_written, params=params,
                    param_bytes=param_bytes, input_shapes=input_shapes, input_dtypes=input_dtypes,
                    output_shapes=output_shapes, output_dtypes=output_dtypes, counted=counted,
                    latency_ms=latency_ms, start_ms=start_ms, source=source, mac_dtype=mac_dtype,
                    library=getattr(call, "library", None))


def unsupported_name(op, attrs: dict) -> str:
    """The name a report lists an op without a rule under: the op's, or what an op standing for
    a model file's node says it stands for (``ONNX TopK``)."""
    return op.unsupported_label(attrs) if op.unsupported_label is not None else op.name


def unsupported_list(unpriced, latency: list | None = None) -> list:
    """:class:`Unsupported` entries, one per name, from ``unpriced`` (the index, op, attrs and
    source node name, or None, of every op the convention has no rule for) and, when timed,
    ``latency`` (ms of every op, so each entry gets its share of the whole)."""
    calls: Counter = Counter()
    spent: dict = {}
    nodes: dict = {}
    for i, op, attrs, source in unpriced:
        name = unsupported_name(op, attrs)
        calls[name] += 1
        if source:
            nodes.setdefault(name, []).append(source)
        if latency is not None and latency[i] is not None:
            spent[name] = spent.get(name, 0.0) + latency[i]
    whole = sum(x for x in latency if x is not None) if latency else 0.0
    return [Unsupported("op", name, n, spent.get(name, 0.0) / whole if whole else None, nodes.get(name, []))
            for name, n in sorted(calls.items())]


__all__ = ["OpCall", "own_costs", "price", "macs_flops", "op_record", "unsupported_name", "unsupported_list"]
