"""Every registered op, by family. Importing this package registers them all."""

from . import (activations, attention, bitwise, conv, cumulative, detection, dropout, elementwise,  # noqa: F401
               embedding, grid_sample, indexing, linalg, loss, movement, norm, pooling, reduction, resample,
               sampling, scatter, selection, trigonometric)
