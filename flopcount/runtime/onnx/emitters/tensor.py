"""Emitters of movement (reshape, permute, cat, pad...) and indexing (getitem, index, index_put, gather)."""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ._base import INT64_MIN, emitter, unsupported


# --- movement ----------------------------------------------------------------------------------

@emitter("reshape")
def reshape(b, node, ins, outs):
    b.add("Reshape", [ins[0], b.ints(node.attrs["shape"])], outs)


@emitter("permute")
def permute(b, node, ins, outs):
    b.add("Transpose", ins, outs, perm=list(node.attrs["dims"]))


@emitter("expand")
def expand(b, node, ins, outs):
    b.add("Expand", [ins[0], b.ints(node.attrs["shape"])], outs)


@emitter("cat")
def cat(b, node, ins, outs):
    b.add("Concat", ins, outs, axis=node.attrs["dim"])


@emitter("cache_append")
def cache_append(b, node, ins, outs):
    b.add("Concat", ins, outs, axis=node.outputs[0].ndim - 2)  # the in-place write ONNX has no op for


@emitter("flip")
def flip(b, node, ins, outs):
    dims = list(node.attrs["dims"])
    b.add("Slice", [ins[0], b.ints([-1] * len(dims)), b.ints([INT64_MIN] * len(dims)), b.ints(dims),
                    b.ints([-1] * len(dims))], outs)


@emitter("repeat")
def repeat(b, node, ins, outs):
    x = node.inputs[0]
    repeats = node.attrs["repeats"]
    src = ins[0]
    if len(repeats) > x.ndim:  # leading new dims, as torch's repeat
        src = b.add("Reshape", [src, b.ints((1,) * (len(repeats) - x.ndim) + tuple(x.shape))])
    b.add("Tile", [src, b.ints(repeats)], outs)


@emitter("pad")
def pad(b, node, ins, outs):
    pairs = node.attrs["pads"]
    pads = [p for p, _ in pairs] + [q for _, q in pairs]
    b.add("Pad", [ins[0], b.ints(pads), b.scalar(node.attrs["value"], node.inputs[0].dtype)], outs, mode="constant")


@emitter("tril", "triu")
def triangle(b, node, ins, outs):
    upper, k = node.op_name == "triu", node.attrs["diagonal"]
    if b.opset >= 14:
        b.add("Trilu", [ins[0], b.const(np.array(k, np.int64), "k")], outs, upper=int(upper))
        return
    x = node.inputs[0]  # before Trilu: a select with the constant triangle
    rows, cols = x.shape[-2:]
    keep = np.triu(np.ones((rows, cols), bool), k) if upper else np.tril(np.ones((rows, cols), bool), k)
    b.add("Where", [b.const(keep, "triangle"), ins[0], b.scalar(0, x.dtype)], outs)


# --- indexing ----------------------------------------------------------------------------------

def _basic_slices(b, node, x: str, items, shape) -> str:
    """``x`` after the slices and integers of ``items`` (integers as one-element slices, then
    squeezed) and the new axes (None), in one Slice, a Squeeze and an Unsqueeze."""
    starts, ends, axes, steps, squeeze = [], [], [], [], []
    dim = 0
    for it in items:
        kind = it[0]
        if kind == "s":
            start, stop, step = it[1], it[2], it[3]
            if (start, stop, step) != (0, shape[dim], 1):
                starts.append(start)
                ends.append(INT64_MIN if stop < 0 else stop)  # stop -1: before index 0 (negative step)
                axes.append(dim)
                steps.append(step)
            dim += 1
        elif kind == "i":
            starts.append(it[1])
            ends.append(it[1] + 1)
            axes.append(dim)
            steps.append(1)
            squeeze.append(dim)
            dim += 1
        elif kind != "n":
            raise unsupported(node, f"index item {it} is not a slice, an integer or None")
    if axes:
        x = b.add("Slice", [x, b.ints(starts), b.ints(ends), b.ints(axes), b.ints(steps)])
    if squeeze:
        x = b.add("Squeeze", [x, b.ints(squeeze)])
    # new axes land where they stand among the items that keep a dim
    new, kept = [], 0
    for it in items:
        if it[0] == "n":
            new.append(kept)
            kept += 1
        elif it[0] == "s":
            kept += 1
    if new:
        x = b.add("Unsqueeze", [x, b.ints(new)])
    return x


@emitter("getitem")
def getitem(b, node, ins, outs):
    y = _basic_slices(b, node, ins[0], node.attrs["items"], node.inputs[0].shape)
    b.add("Identity", [y], outs)


def _stacked_indices(b, node, names, values) -> str:
    """Index tensors broadcast together and stacked on a new last dim (GatherND's indices)."""
    from ...ops._helpers import broadcast_shapes

    shape: tuple = ()
    for v in values:
        shape = broadcast_shapes("index", shape, v.shape)
    parts = []
    for name, v in zip(names, values):
        part = b.cast(name, v.dtype, _dt.int64)
        if v.shape != shape:
            part = b.add("Expand", [part, b.ints(shape)])
        parts.append(b.add("Unsqueeze", [part, b.ints([len(shape)])]))
    return parts[0] if len(parts) == 1 else b.add("Concat", parts, axis=len(shape))


@emitter("index")
def index(b, node, ins, outs):
    items = node.attrs["items"]
    x = node.inputs[0]
    tensor_pos = [i for i, it in enumerate(items) if it[0] == "t"]
    basic = [it if it[0] != "t" else ["s", 0, x.shape[i], 1] for i, it in enumerate(items)]
    if any(it[0] in ("n", "i") for it in items):
        raise unsupported(node, "advanced indexing mixed with integers or None is not supported")
    src = _basic_slices(b, node, ins[0], basic, x.shape)
    if len(tensor_pos) == 1:  # one index tensor: a Gather along its dim
        b.add("Gather", [src, ins[1 + items[tensor_pos[0]][1]]], outs, axis=tensor_pos[0])
        return
    if tensor_pos != list(range(len(tensor_pos))):
        raise unsupported(node, "several index tensors are supported on the leading dims only")
    order = [items[p][1] for p in tensor_pos]
    indices = _stacked_indices(b, node, [ins[1 + j] for j in order], [node.inputs[1 + j] for j in order])
    b.add("GatherND", [src, indices], outs)


@emitter("index_put")
def index_put(b, node, ins, outs):
    items = node.attrs["items"]
    x, value = node.inputs[0], node.inputs[1]
    if items and all(it[0] == "t" for it in items):
        values = node.inputs[2:]
        indices = _stacked_indices(b, node, ins[2:], values)
        target = _target_shape(values, x.shape[len(items):])
    elif all(it[0] in ("s", "i") for it in items):
        # basic indexing: the positions it selects, as a constant index grid
        grids = np.meshgrid(*[_positions(it, n) for it, n in zip(items, x.shape)], indexing="ij")
        full = np.stack(grids, -1)
        keep = [i for i, it in enumerate(items) if it[0] == "s"]
        full = full.reshape([full.shape[i] for i in range(len(items)) if i in keep] + [len(items)])
        indices = b.const(full.astype(np.int64), "indices")
        target = tuple(full.shape[:-1]) + tuple(x.shape[len(items):])
    else:
        raise unsupported(node, "assignment through mixed basic and advanced indices is not supported")
    updates = b.cast(ins[1], value.dtype, x.dtype)
    if tuple(value.shape) != tuple(target):
        updates = b.add("Expand", [updates, b.ints(target)])
    b.add("ScatterND", [ins[0], indices, updates], outs)


def _positions(item, size: int) -> np.ndarray:
    if item[0] == "i":
        return np.array([item[1]])
    start, stop, step = item[1], item[2], item[3]
    return np.arange(start, stop if stop >= 0 else -1, step) if step < 0 else np.arange(start, stop, step)


def _target_shape(values, trailing) -> tuple:
    from ...ops._helpers import broadcast_shapes

    shape: tuple = ()
    for v in values:
        shape = broadcast_shapes("index_put", shape, v.shape)
    return shape + tuple(trailing)


@emitter("gather")
def gather(b, node, ins, outs):
    b.add("GatherElements", ins, outs, axis=node.attrs["dim"])
