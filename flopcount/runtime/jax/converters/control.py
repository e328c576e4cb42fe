"""Calls and control flow.

* Calls (``jit``, ``closed_call``, ``custom_jvp_call``, ``custom_vjp_call``, ``checkpoint``):
  the inner jaxpr is converted in place (its equations in the call's scope plus their own).
* ``scan`` (static length, as JAX requires): unrolled, the body converted once per step on
  that step's slices, so its cost counts ``length`` times and the graph runs like the loop.
* ``cond``: every branch is converted and priced; when the index is known at import time that
  branch is kept, else the most expensive one, and a note lists each branch's FLOPs.
* ``while``: the trip count is data, so the loop is an ``opaque`` op (listed as unsupported,
  counted as zero) and a note gives its body's cost per iteration.
"""

from __future__ import annotations

import numpy as np

from ...ops import indexing, movement
from ...ops.opaque import opaque
from ._base import constant, converter, spec_of


def _inner(ctx):
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        if key in ctx.params:
            return ctx.params[key]
    raise ctx.unsupported(f"a call without an inner jaxpr (parameters {sorted(ctx.params)})")


@converter("jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
           "custom_vjp_call_jaxpr", "checkpoint", "remat", "custom_lin")
def call(ctx, *inputs):
    return ctx.run(_inner(ctx), list(inputs))


@converter("scan")
def scan(ctx, *inputs):
    p = ctx.params
    length, n_consts, n_carry = int(p["length"]), int(p["num_consts"]), int(p["num_carry"])
    consts, carry, xs = list(inputs[:n_consts]), list(inputs[n_consts:n_consts + n_carry]), inputs[n_consts + n_carry:]
    steps = range(length - 1, -1, -1) if p.get("reverse") else range(length)
    ys: dict = {}
    for i in steps:
        outs = ctx.run(p["jaxpr"], consts + carry + [indexing.getitem(x, i) for x in xs])
        carry, ys[i] = list(outs[:n_carry]), outs[n_carry:]
    ctx.note(f"scan{_at(ctx)}: {length} steps, unrolled (the body is counted {length} times)")
    stacked = [movement.stack([ys[i][k] for i in range(length)], dim=0) if length else _empty(ctx, n_carry + k)
               for k in range(len(ctx.out_avals) - n_carry)]
    return carry + stacked


def _empty(ctx, k: int):
    """The stacked outputs of a scan of length 0: empty."""
    shape, dtype = spec_of(ctx.out_avals[k])
    return constant(np.zeros(shape, dtype.np))


def _at(ctx) -> str:
    return f" in {ctx.scope}" if ctx.scope else ""


def _priced(ctx, run) -> tuple:
    """(outputs, FLOPs, first node, end node) of ``run()``, converted into the graph."""
    nodes = ctx.walk.tracer.graph.nodes
    first = len(nodes)
    outs = run()
    return outs, sum(n.cost().flops for n in nodes[first:]), first, len(nodes)


@converter("cond")
def cond(ctx, index, *operands):
    branches = ctx.params["branches"]
    priced = [_priced(ctx, lambda b=b: ctx.run(b, list(operands))) for b in branches]
    known = index.data is not None
    if known:
        chosen = min(max(int(ctx.const(index, "the branch index").reshape(())), 0), len(branches) - 1)
    else:
        chosen = max(range(len(branches)), key=lambda i: priced[i][1])
    nodes = ctx.walk.tracer.graph.nodes
    for i in reversed(range(len(branches))):
        if i != chosen:
            del nodes[priced[i][2]:priced[i][3]]
    costs = ", ".join(f"branch {i}: {flops} FLOPs" for i, (_, flops, _, _) in enumerate(priced))
    why = "its index is known" if known else "the most expensive; the index is data"
    ctx.note(f"cond{_at(ctx)}: {costs}; branch {chosen} is counted and run ({why})")
    return priced[chosen][0]


@converter("while")
def while_loop(ctx, *inputs):
    p = ctx.params
    n_cond, n_body = int(p["cond_nconsts"]), int(p["body_nconsts"])
    body_consts, init = list(inputs[n_cond:n_cond + n_body]), list(inputs[n_cond + n_body:])
    _, flops, first, end = _priced(ctx, lambda: ctx.run(p["body_jaxpr"], body_consts + init))
    del ctx.walk.tracer.graph.nodes[first:end]
    ctx.walk.unsupported["while"] += 1
    ctx.note(f"while_loop{_at(ctx)}: the trip count is not static, so the loop is not counted "
             f"(its body: {flops} FLOPs per iteration)")
    outputs = [(shape, dtype.name) for shape, dtype in map(spec_of, ctx.out_avals)]
    y = opaque(*[t for t in inputs if t is not None], label="JAX while", node=ctx.scope or "while", outputs=outputs)
    return list(y) if isinstance(y, tuple) else [y]
