"""The table ``runtime op -> emitter`` (``EMITTERS``), filled by the family modules.

A new emitter goes in the family file of its op (``math.py``: elementwise and activations;
``nn.py``: linear algebra, conv, norms, pools, dropout, attention; ``resize.py``; ``tensor.py``:
movement and indexing; ``reduce.py``; ``fused.py``; ``onnx_ops.py``: the runtime ops that are
ONNX operators themselves, TopK, GridSample, the scatters...) with an export case in
``tests/runtime/onnx/test_onnx_export.py``.
"""

from ._base import EMITTERS, emitter
from . import fused, math, nn, onnx_ops, reduce, resize, tensor  # noqa: F401  (each registers its emitters)

__all__ = ["EMITTERS", "emitter"]
