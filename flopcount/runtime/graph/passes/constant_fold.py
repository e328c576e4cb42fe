"""Constant folding: a node whose inputs are all constants runs once, now, on the CPU, and its
outputs become constants. Random ops are never folded, nor nodes whose outputs would be above
``folding.FOLD_LIMIT_BYTES`` (bounded memory).

Tracing already folds what it can; this pass is for graphs built or loaded otherwise (and for
what other passes expose). With ``fold_parameters=True`` parameters and buffers count as
constants too (an inference graph: ``weight.T`` folds into a transposed weight).
"""

from __future__ import annotations

from math import prod

from ..folding import fold_limit, run_on_cpu
from .dce import dce


def constant_fold(graph, fold_parameters: bool = False):
    """A copy of ``graph`` with every foldable node replaced by constants (then dead code
    removed).

    >>> import flopcount.runtime as rt
    >>> g = rt.trace(lambda x: x + 1, rt.randn(3))
    >>> len(constant_fold(g).nodes)   # x is an input: nothing to fold
    1
    """
    out = graph.copy()
    fixed = set(out.constants) | (set(out.parameters) if fold_parameters else set())
    replaced: dict = {}   # folded value name -> its new constant Value
    kept = []
    for node in out.nodes:
        node.inputs = [None if v is None else replaced.get(v.name, v) for v in node.inputs]
        ins = [v for v in node.inputs if v is not None]
        foldable = (not node.op.random and all(v.name in fixed for v in ins)
                    and all(out.tensors[v.name].data is not None for v in ins)
                    and sum(prod(v.shape) * v.dtype.itemsize for v in node.outputs) <= fold_limit())
        if not foldable:
            kept.append(node)
            continue
        args = [None if v is None else out.tensors[v.name] for v in node.inputs]
        result = run_on_cpu(node.op, args, node.attrs)
        results = result if isinstance(result, tuple) else (result,)
        for v, t in zip(node.outputs, results):
            c = out.add_constant(t, base=f"{v.name}_folded")
            replaced[v.name] = c
            fixed.add(c.name)
    out.nodes = kept
    out.outputs = [replaced.get(v.name, v) for v in out.outputs]
    return dce(out)
