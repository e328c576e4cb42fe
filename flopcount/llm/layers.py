"""Where a decoder keeps its layers, for native and transformers models alike."""

from __future__ import annotations


def layer_list(model) -> str | None:
    """The dotted path of the decoder's layers: the longest ModuleList (``model.layers``)."""
    lists = [(len(m), path) for path, m in model.named_modules() if type(m).__name__ == "ModuleList" and len(m)]
    return max(lists)[1] if lists else None


__all__ = ["layer_list"]
