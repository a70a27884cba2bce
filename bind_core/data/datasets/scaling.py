"""Feature preprocessing shared by the loaders: min-max scaling and constant-column removal."""

from __future__ import annotations

import numpy as np


def minmax_scale(x: np.ndarray) -> np.ndarray:
    """Scale every column linearly to ``[-1, 1]`` (BIND's ``feature_norm``).

    A column whose minimum equals its maximum (zero range) maps to 0 instead of dividing by zero.

    Args:
        x: a ``[n, d]`` numeric matrix.

    Returns:
        A new float64 ``[n, d]`` matrix.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x.copy()
    lo, hi = column_ranges(x)
    span = hi - lo
    safe = np.where(span > 0, span, 1.0)
    return np.where(span > 0, 2.0 * (x - lo) / safe - 1.0, 0.0)


def column_ranges(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's minimum and maximum, what :func:`minmax_scale` maps to ``-1`` and ``1``.

    Args:
        x: a non-empty ``[n, d]`` numeric matrix.

    Returns:
        Two float64 ``[d]`` vectors: the minima and the maxima.
    """
    x = np.asarray(x, dtype=np.float64)
    return x.min(axis=0), x.max(axis=0)


def nonconstant_columns(x: np.ndarray) -> np.ndarray:
    """Indices of the columns of ``x`` whose values are not all equal (non-zero variance)."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] == 0:
        return np.arange(x.shape[1])
    return np.flatnonzero(x.max(axis=0) > x.min(axis=0))
