"""Every registered op, by family. Importing this package registers them all."""

from . import (activations, attention, bitwise, conv, cumulative, dropout, elementwise, embedding,  # noqa: F401
               indexing, linalg, loss, movement, norm, pooling, reduction, resample, sampling, scatter,
               selection, trigonometric)
