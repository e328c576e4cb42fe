"""Conv + batch-norm folding for inference.

An inference batch norm (``training`` False, running statistics present) right after a conv
whose output nothing else reads is an affine map per output channel, so it folds into the
conv's weight and bias:

    scale = gamma / sqrt(running_var + eps)
    weight' = weight * scale (over the output-channel dim),  bias' = (bias - running_mean) * scale + beta

The folded weight and bias are new parameters computed now (in float64, stored at the weight's
dtype); with meta parameters they are meta too, so a meta graph folds by shape alone. The result
is a snapshot: later changes to the original parameters do not reach it.
"""

from __future__ import annotations

import numpy as np

from ...device import CPU, META
from ...tensor import Tensor
from .dce import dce


def _array(graph, v):
    """The value's data as a float64 numpy array, or None for meta."""
    t = graph.tensors.get(v.name)
    if t is None or t.data is None:
        return None
    return np.asarray(t.numpy(), dtype=np.float64)


def _bn_foldable(graph, bn, users, outputs) -> bool:
    if bn.op.name != "batch_norm" or bn.attrs.get("training", True):
        return False
    x, _, _, mean, var = (list(bn.inputs) + [None] * 5)[:5]
    if mean is None or var is None or x is None:
        return False
    if any(v is not None and v.name not in graph.tensors for v in bn.inputs[1:5]):
        return False  # statistics computed in the graph, not stored: nothing to fold
    if x.name in outputs or len(users.get(x.name, ())) != 1:
        return False
    return all(v.name not in users and v.name not in outputs for v in bn.outputs[1:])


def fold_conv_bn(graph):
    """A copy of ``graph`` with each conv -> inference batch_norm pair folded into one conv.

    >>> import flopcount.runtime as rt
    >>> m = rt.nn.Sequential(rt.nn.Conv2d(3, 8, 3), rt.nn.BatchNorm2d(8)).eval()
    >>> [n.op_name for n in fold_conv_bn(rt.trace(m, rt.randn(1, 3, 8, 8))).nodes]
    ['conv']
    """
    out = graph.copy()
    users = out.users()
    outputs = {v.name for v in out.outputs}
    producers = out.producers()
    removed, renamed = set(), {}
    for bn in out.nodes:
        if not _bn_foldable(out, bn, users, outputs):
            continue
        conv = producers.get(bn.inputs[0].name)
        if conv is None or conv.op.name != "conv" or len(conv.outputs) != 1:
            continue
        weight, bias = conv.inputs[1], (conv.inputs[2] if len(conv.inputs) > 2 else None)
        if weight is None or weight.name not in out.tensors or (bias is not None and bias.name not in out.tensors):
            continue
        new_w, new_b = _folded_tensors(out, bn, weight, bias)
        base = weight.name[: -len("weight")] if weight.name.endswith("weight") else weight.name + "."
        w_val = out.add_parameter(f"{base}weight_folded", new_w, "param", unique=True)
        b_val = out.add_parameter(f"{base}bias_folded", new_b, "param", unique=True)
        conv.inputs = [conv.inputs[0], w_val, b_val]
        renamed[bn.outputs[0].name] = conv.outputs[0]  # readers of the norm now read the conv
        removed.add(id(bn))
    out.nodes = [n for n in out.nodes if id(n) not in removed]
    for n in out.nodes:
        n.inputs = [None if v is None else renamed.get(v.name, v) for v in n.inputs]
    out.outputs = [renamed.get(v.name, v) for v in out.outputs]
    return dce(out)


def _folded_tensors(graph, bn, weight, bias):
    cout, dtype = weight.shape[0], weight.dtype
    sources = [weight, bias] + list(bn.inputs[1:5])
    if any(v is not None and graph.tensors[v.name].data is None for v in sources):
        return Tensor._make(None, weight.shape, dtype, META), Tensor._make(None, (cout,), dtype, META)
    gamma, beta, mean, var = (None if v is None else _array(graph, v) for v in bn.inputs[1:5])
    gamma = np.ones(cout) if gamma is None else gamma
    beta = np.zeros(cout) if beta is None else beta
    b = np.zeros(cout) if bias is None else _array(graph, bias)
    w = _array(graph, weight)
    scale = gamma / np.sqrt(var + float(bn.attrs.get("eps", 1e-5)))
    new_w = w * scale.reshape((cout,) + (1,) * (w.ndim - 1))
    new_b = (b - mean) * scale + beta
    dev = graph.tensors[weight.name].device
    return (Tensor._make(new_w.astype(dtype.np), weight.shape, dtype, CPU).to(dev),
            Tensor._make(new_b.astype(dtype.np), (cout,), dtype, CPU).to(dev))
