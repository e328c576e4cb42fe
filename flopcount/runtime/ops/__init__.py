"""Every registered op, by family. Importing this package registers them all."""

from . import (activations, attention, boxing, conv, dropout, elementwise, embedding, indexing,  # noqa: F401
               linalg, loss, movement, norm, pooling, quantized, reduction, sampling)
