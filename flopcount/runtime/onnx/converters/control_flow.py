"""Control flow: If, Loop and Scan, unrolled at import.

A graph is specialized to its input shapes, so its control flow is resolved when it is built:
Loop and Scan run their body once per iteration, each iteration's ops recorded in a scope of
its own (``loop.0``, ``loop.1``...), so the report counts every iteration and shows how many ran;
the trip count is also noted for the report. A Loop's trip count and condition must be known at
import (constants, shape arithmetic, or graph inputs whose values are bound); Scan iterates over
the length of its inputs. An If whose condition is known converts the branch taken; one whose
condition depends on the data converts both and selects the outputs, counting both branches.
"""

from __future__ import annotations

import numpy as np

from ...ops import elementwise as ew
from ...ops import movement
from ...ops.indexing import getitem
from ._base import constant, converter, is_const

# a Loop unrolled further than this is refused rather than traced for minutes
MAX_UNROLLED = 100_000


def _scope(ctx) -> str:
    return ctx.name or ctx.op_type.lower()


@converter("If")
def if_(ctx, cond):
    then_branch, else_branch = ctx.attr("then_branch"), ctx.attr("else_branch")
    if is_const(cond):
        taken = bool(ctx.scalar(cond, "input 'cond'"))
        return _outputs(ctx.subgraphs.run(then_branch if taken else else_branch, [], "then" if taken else "else"))
    then_out = ctx.subgraphs.run(then_branch, [], "then")
    else_out = ctx.subgraphs.run(else_branch, [], "else")
    for a, b in zip(then_out, else_out):
        if tuple(a.shape) != tuple(b.shape) or a.dtype is not b.dtype:
            raise ctx.unsupported(f"the condition depends on the data and the branches give different shapes "
                                  f"({a.shape} {a.dtype.name} and {b.shape} {b.dtype.name})")
    ctx.subgraphs.note(f"If node {_scope(ctx)!r}: the condition depends on the data; both branches are counted")
    flag = movement.reshape(cond, ())
    return _outputs([ew.where(flag, a, b) for a, b in zip(then_out, else_out)])


def _outputs(values: list):
    return values[0] if len(values) == 1 else tuple(values)


@converter("Loop")
def loop(ctx, trip_count=None, cond=None, *carried):
    body = ctx.attr("body")
    limit = None if trip_count is None else int(ctx.scalar(trip_count, "input 'M' (the trip count)"))
    going = True if cond is None else bool(ctx.scalar(cond, "input 'cond'"))
    carried = list(carried)
    n_scans = len(body.output) - 1 - len(carried)
    scans: list = [[] for _ in range(n_scans)]
    i = 0
    while going and (limit is None or i < limit):
        if i >= MAX_UNROLLED:
            raise ctx.unsupported(f"the loop runs more than {MAX_UNROLLED} iterations; flopcount unrolls loops")
        step = [constant(np.array(i, np.int64)), constant(np.array(going))]
        outs = ctx.subgraphs.run(body, step + carried, str(i))
        if not is_const(outs[0]):
            raise ctx.unsupported(f"the loop's condition depends on the data (iteration {i}); flopcount unrolls "
                                  f"loops whose trip count is known when the graph is built")
        going = bool(ctx.scalar(outs[0], "the body's condition"))
        carried = list(outs[1:1 + len(carried)])
        for k, value in enumerate(outs[1 + len(carried):]):
            scans[k].append(value)
        i += 1
    ctx.subgraphs.note(f"Loop node {_scope(ctx)!r}: {i} iteration{'s' if i != 1 else ''} counted")
    stacked = [movement.stack(values, 0) if values else _empty_scan(ctx, body, 1 + len(carried) + k)
               for k, values in enumerate(scans)]
    return _outputs(carried + stacked)


def _empty_scan(ctx, body, index: int):
    """A scan output of a loop that ran no iteration: (0, *the body output's declared shape)."""
    from ..elem_types import to_dtype

    declared = body.output[index].type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else None for d in declared.shape.dim]
    if None in dims:
        raise ctx.unsupported(f"the loop ran no iteration and scan output {index} has no declared shape")
    dtype = to_dtype(declared.elem_type, f"{ctx.where}: scan output {index}")
    return constant(np.zeros([0] + dims, dtype=dtype.np))


@converter("Scan")
def scan(ctx, *inputs):
    body = ctx.attr("body")
    n_in = int(ctx.attr("num_scan_inputs"))
    if ctx.opset < 9:  # opset 8: a batch dim first, and optional sequence lengths
        return _batched_scan(ctx, body, n_in, inputs)
    states, xs = list(inputs[:len(inputs) - n_in]), list(inputs[len(inputs) - n_in:])
    outs = _scan_loop(ctx, body, states, xs, ctx.attr("scan_input_axes"), ctx.attr("scan_input_directions"), "")
    return _outputs(outs)


def _scan_loop(ctx, body, states: list, xs: list, in_axes, in_directions, scope: str) -> list:
    """Unroll one scan: its final states, then its scan outputs stacked along their axes."""
    in_axes = [ctx.axis(int(a), x.ndim) for a, x in zip(in_axes or [0] * len(xs), xs)]
    in_directions = list(in_directions or [0] * len(xs))
    steps = xs[0].shape[in_axes[0]] if xs else 0
    collected: list = []
    for t in range(steps):
        elements = [getitem(x, (slice(None),) * a + (steps - 1 - t if d else t,))
                    for x, a, d in zip(xs, in_axes, in_directions)]
        outs = ctx.subgraphs.run(body, states + elements, f"{scope}{t}")
        states = list(outs[:len(states)])
        collected.append(outs[len(states):])
    ctx.subgraphs.note(f"Scan node {_scope(ctx)!r}: {steps} iteration{'s' if steps != 1 else ''} counted")
    n_out = len(body.output) - len(states)
    out_axes = list(ctx.attr("scan_output_axes") or [0] * n_out)
    out_directions = list(ctx.attr("scan_output_directions") or [0] * n_out)
    stacked = []
    for k in range(n_out):
        values = [c[k] for c in collected]
        if not values:
            raise ctx.unsupported("the scan inputs are empty: no iteration gives the scan outputs' shapes")
        if out_directions[k]:
            values = values[::-1]
        stacked.append(movement.stack(values, ctx.axis(int(out_axes[k]), values[0].ndim + 1)))
    return states + stacked


def _batched_scan(ctx, body, n_in: int, inputs):
    """Scan-8: every input has a batch dim first, the scan runs per batch element along dim 1
    (up to that element's sequence length, which must then be the full length)."""
    lengths, rest = inputs[0], list(inputs[1:])
    states, xs = rest[:len(rest) - n_in], rest[len(rest) - n_in:]
    if lengths is not None:
        full = xs[0].shape[1]
        if not is_const(lengths) or any(int(n) != full for n in ctx.const(lengths, "input 'sequence_lens'")):
            raise ctx.unsupported("sequence_lens shorter than the scan inputs are not supported")
    directions = ctx.attr("directions")
    per_batch = []
    for b in range(xs[0].shape[0] if xs else states[0].shape[0]):
        pick = [getitem(t, (b,)) for t in states + xs]
        per_batch.append(_scan_loop(ctx, body, pick[:len(states)], pick[len(states):], None, directions, f"{b}."))
    return _outputs([movement.stack([outs[k] for outs in per_batch], 0) for k in range(len(per_batch[0]))])


