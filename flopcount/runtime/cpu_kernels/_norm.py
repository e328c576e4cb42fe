"""Layer normalization of float32 rows in two compiled passes: each row's mean and standard
deviation, then (x - mean) / std, times the weight, plus the bias.

Rows come in two layouts: contiguous (a transformer's tokens; ``row_moments``) or strided with
consecutive rows next to each other (a channels-first map normalized over its channels, as
ConvNeXt's exports transpose it; ``column_moments``, whose loops run over rows innermost so that
memory is read in order). ``normalize_rows`` serves both: from the second layout, row by row was
faster than in column blocks, as neighbouring rows share cache lines. The output is in
contiguous rows either way: what reads a layer norm's output over the normalized axis (the
linear layer after ConvNeXt's) then gets it as BLAS wants it, without a copy.

numpy's kernel takes seven passes over the array (mean, subtract, square, mean, add, sqrt,
divide; then the affine). Here the row sums may be reordered (``fastmath`` reassociation, their
own function so that nothing else is): the compiler then sums in vector lanes, where a sum in
order is a serial chain of adds. They are float32 sums, as numpy's, over lanes of 16 or 8 instead
of numpy's pairwise blocks, so the mean and variance differ from numpy's by a few units in the
last place; the normalization after them is numpy's operations in numpy's order. In the
second layout each row's sums are in order (the lanes are rows), as exact as numpy's for rows of
up to a few thousand values.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit


def _row_moments(x, eps, mean, std):
    """mean[i] and std[i] = sqrt(var + eps) of row i of x (rows, columns), two-pass variance."""
    rows, columns = x.shape
    count = np.float32(columns)
    for i in range(rows):
        total = np.float32(0.0)
        for j in range(columns):
            total += x[i, j]
        m = total / count
        squares = np.float32(0.0)
        for j in range(columns):
            d = x[i, j] - m
            squares += d * d
        mean[i] = m
        std[i] = np.sqrt(squares / count + eps)


row_moments = jit(_row_moments, fastmath={"reassoc"})


@jit
def normalize_rows(x, mean, std, weight, bias, has_weight, has_bias, out):
    """out[i, j] = (x[i, j] - mean[i]) / std[i] · weight[j] + bias[j] (the affine where given)."""
    rows, columns = x.shape
    for i in range(rows):
        m = mean[i]
        s = std[i]
        for j in range(columns):
            y = (x[i, j] - m) / s
            if has_weight:
                y = y * weight[j]
            if has_bias:
                y = y + bias[j]
            out[i, j] = y


@jit
def column_moments(x, eps, mean, std):
    """``row_moments`` for x (rows, columns) whose rows are adjacent in memory (unit row stride):
    the sums of all rows advance together, one column at a time."""
    rows, columns = x.shape
    count = np.float32(columns)
    total = np.zeros(rows, np.float32)
    for j in range(columns):
        for i in range(rows):
            total[i] += x[i, j]
    for i in range(rows):
        mean[i] = total[i] / count
    squares = np.zeros(rows, np.float32)
    for j in range(columns):
        for i in range(rows):
            d = x[i, j] - mean[i]
            squares[i] += d * d
    for i in range(rows):
        std[i] = np.sqrt(squares[i] / count + eps)
