"""Initializers that are precomputed tables, not weights: what their consumers say.

Exporters store as initializers what the model computes from constants: rotary embeddings'
frequencies and cos/sin caches, causal masks, relative-position biases expanded from their
learned table. PyTorch holds them as buffers; a file holds them beside the weights, and
counting them as parameters inflates a model (a CoAtNet export shows 11 % more parameters
than the model has). A floating initializer of more than one element is a **table** when every
use of it, after ops that only move or select its elements (Slice, Gather, Reshape,
Unsqueeze, Expand, Transpose, Cast, Concat...), is one of:

* the cos/sin cache of a rotary embedding (ONNX and com.microsoft RotaryEmbedding,
  com.microsoft GroupQueryAttention), or the mask / bias input of an attention op (ONNX
  Attention, com.microsoft Attention and MultiHeadAttention);
* an angle: the input of Cos or Sin, or a product that reaches one (rotary frequencies times
  positions);
* an operand of Add or Where (not its condition) whose result reaches a Softmax through
  elementwise ops, read without a Gather and of two dims or more (an additive mask or an expanded bias; a learned
  relative-position table is read through a Gather of its indices, and stays a weight);
* an operand of Mul after a Gather or Slice of positions, of two dims or more (a cos/sin cache
  indexed by position ids, multiplied into the queries and keys; a learned scale is
  multiplied as it is).

Any other use (a MatMul, Conv or Gemm operand, a norm's scale, an embedding lookup followed
by an Add, a bias added to activations) makes it a weight. Tables are imported as buffers, as
PyTorch holds them: apart from the parameters in the report's counts and memory.
"""

from __future__ import annotations

from collections import defaultdict
from math import prod

# ops that only move or select elements: a table read through them is still the table
_MOVES = {"Slice", "Gather", "Reshape", "Unsqueeze", "Squeeze", "Expand", "Cast", "Transpose", "Identity",
          "Concat", "Tile", "Flatten"}
_SELECTS = {"Gather", "Slice"}
# ops between an additive mask and the Softmax it masks
_TOWARD_SOFTMAX = _MOVES | {"Add", "Sub", "Mul", "Div", "Where", "Max", "Min"}
# inputs (by index) of ops that read tables: rotary caches, attention masks and biases
_TABLE_INPUTS = {"RotaryEmbedding": (1, 2), "com.microsoft.RotaryEmbedding": (2, 3),
                 "com.microsoft.GroupQueryAttention": (7, 8), "Attention": (3,), "com.microsoft.Attention": (5,),
                 "com.microsoft.MultiHeadAttention": (5,)}
_FLOATING = {1, 10, 11, 16}  # FLOAT, FLOAT16, DOUBLE, BFLOAT16


def _label(node) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


class _Uses:
    def __init__(self, graph):
        self.readers = defaultdict(list)  # value name -> [(node, input index)]
        for node in graph.node:
            for i, name in enumerate(node.input):
                if name:
                    self.readers[name].append((node, i))
        self.graph_outputs = {v.name for v in graph.output}

    def reaches(self, name: str, targets: set, through: set, depth: int = 8) -> bool:
        """Whether value ``name`` flows into an op of ``targets`` through ops of ``through``."""
        frontier, seen = [name], set()
        for _ in range(depth):
            following = []
            for value in frontier:
                for node, _ in self.readers.get(value, []):
                    if node.op_type in targets:
                        return True
                    if node.op_type in through and id(node) not in seen:
                        seen.add(id(node))
                        following.extend(o for o in node.output if o)
            frontier = following
            if not frontier:
                return False
        return False

    def is_table(self, name: str, rank: int) -> bool:
        """Whether every use of ``name`` (an initializer of ``rank`` dims) is a table's (see the
        module docstring). Masks, biases and caches have two dims or more: a vector added before
        a Softmax is a classifier's bias."""
        stack, seen, used = [(name, False)], set(), False
        while stack:
            value, selected = stack.pop()
            if value in self.graph_outputs:
                return False
            for node, index in self.readers.get(value, []):
                used = True
                label = _label(node)
                if index in _TABLE_INPUTS.get(label, ()):
                    continue
                if node.op_type in ("Cos", "Sin"):
                    continue
                if node.op_type in _MOVES and (node.op_type not in ("Gather", "Slice") or index == 0):
                    if (id(node), selected) not in seen:
                        seen.add((id(node), selected))
                        stack.extend((o, selected or node.op_type in _SELECTS) for o in node.output if o)
                    continue
                out = next((o for o in node.output if o), "")
                if node.op_type == "Mul" and self.reaches(out, {"Cos", "Sin"}, _TOWARD_SOFTMAX):
                    continue  # frequencies times positions: an angle
                if rank >= 2 and node.op_type in ("Add", "Where") and not (node.op_type == "Where" and index == 0) \
                        and not selected and self.reaches(out, {"Softmax"}, _TOWARD_SOFTMAX):
                    continue
                if rank >= 2 and node.op_type == "Mul" and selected:
                    continue
                return False
        return used


def precomputed_tables(model) -> set:
    """Names of the floating initializers of ``model`` (a ModelProto) that are tables."""
    candidates = []
    for init in model.graph.initializer:
        if init.data_type in _FLOATING and prod(init.dims) > 1:
            candidates.append((init.name, len(init.dims)))
    if not candidates:  # the readers of every value are not worth listing (a million-node chain)
        return set()
    uses = _Uses(model.graph)
    return {name for name, rank in candidates if uses.is_table(name, rank)}
