"""The repeated blocks of a model (a transformer's layers), found from the node scopes.

Pipeline stages and full activation recomputation work in units of the model's repeated
blocks, as Megatron does in units of transformer layers. A block is a module path ending in
an index, ``transformer.h.7``, ``model.layers.7`` or torchvision's ViT
``encoder.layers.encoder_layer_7``; the blocks are the indexed children of the
container that has the most of them, in index order.

    >>> find_blocks(["transformer.wte", "transformer.h.0.attn", "transformer.h.1.mlp", "lm_head"])
    Blocks(prefix='transformer.h.', count=2)
    >>> find_blocks(["transformer.h.0.attn", "transformer.h.1.mlp"]).index_of("transformer.h.1.mlp.act")
    1
    >>> find_blocks(["encoder.layers.encoder_layer_0.mlp", "encoder.layers.encoder_layer_1.mlp"])
    Blocks(prefix='encoder.layers.encoder_layer_', count=2)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_INDEXED = re.compile(r"^(.*?)(\d+)(?:\.|$)")


@dataclass(frozen=True)
class Blocks:
    """The repeated blocks: ``prefix`` + index names block ``index`` (0 <= index < count)."""

    prefix: str
    count: int

    def index_of(self, scope: str):
        """The block a scope belongs to, or None for a scope outside every block."""
        if self.count == 0 or not scope.startswith(self.prefix):
            return None
        rest = scope[len(self.prefix):]
        digits = rest.split(".", 1)[0]
        return int(digits) if digits.isdigit() and int(digits) < self.count else None


NO_BLOCKS = Blocks("", 0)


def find_blocks(scopes) -> Blocks:
    """The container with the most indexed children among ``scopes`` (its children numbered
    0..count-1 without a gap), or ``NO_BLOCKS``."""
    seen: dict = {}
    for scope in scopes:
        prefix = ""
        rest = scope
        while True:  # every indexed level of the path: "a.0.b.3.c" has "a." and "a.0.b."
            m = _INDEXED.match(rest)
            if m is None:
                break
            head, index = m.group(1), int(m.group(2))
            seen.setdefault(prefix + head, set()).add(index)
            consumed = len(head) + len(m.group(2)) + 1
            prefix, rest = prefix + rest[:consumed], rest[consumed:]
    best = NO_BLOCKS
    for prefix, indices in seen.items():
        count = max(indices) + 1
        if len(indices) == count and count > best.count and (prefix.endswith((".", "_")) or prefix == ""):
            best = Blocks(prefix, count)
    return best
