"""Every registered op, by family. Importing this package registers them all."""

from . import (activations, attention, conv, dropout, elementwise, embedding, indexing, linalg,  # noqa: F401
               loss, movement, norm, pooling, quantized, reduction, sampling)
