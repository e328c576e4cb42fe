"""Convolutions (1d/2d/3d, transposed) by im2col into one BLAS matmul."""

from __future__ import annotations

__all__: list = []  # the functional API (nn.functional re-exports it)
