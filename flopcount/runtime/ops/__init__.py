"""Every registered op, by family. Importing this package registers them all."""

from . import (activations, attention, bitwise, boxing, cache, complex_arith, conv, cumulative, detection,  # noqa: F401
               determinant, dropout, elementwise, embedding, grid_sample, histogram, indexing, linalg, loss, movement,
               nary, norm, opaque, pooling, quantized, reduction, resample, sampling, scatter, selection, spectral, trigonometric)
