"""The table ``runtime op -> emitter`` (``EMITTERS``), filled by the family modules, and
``emitter_for``, which also answers for an op that names its ONNX operator (``Op.onnx``): one
node, written by ``direct``, for which the op's ``Example`` is the export case.

An op whose ONNX form needs attributes or a chain of nodes has an emitter, in the family file
of its op (``math.py``: elementwise and activations; ``nn.py``: linear algebra, conv, norms,
pools, dropout, attention; ``resize.py``; ``tensor.py``: movement and indexing; ``reduce.py``;
``fused.py``; ``onnx_ops.py``: ops added for import, TopK, GridSample, the scatters...) with an
export case in ``tests/runtime/onnx/test_onnx_export.py`` (``onnx_ops.py``'s:
``test_onnx_export_native.py``).
"""

from ._base import EMITTERS, emitter, emitter_for
from . import fused, math, nn, onnx_ops, reduce, resize, tensor  # noqa: F401  (each registers its emitters)

__all__ = ["EMITTERS", "emitter", "emitter_for"]
