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
    return scale_by(x, *column_ranges(x))


def scale_by(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Map each column of ``x`` linearly so that its ``lo`` reads ``-1`` and its ``hi`` reads ``1`` (values beyond
    them fall outside ``[-1, 1]``); a column whose ``lo`` equals its ``hi`` maps to 0.

    Args:
        x: a ``[n, d]`` numeric matrix.
        lo, hi: ``[d]`` each column's ends (:func:`column_ranges` of the data they were read from).

    Returns:
        A new float64 ``[n, d]`` matrix.
    """
    x, lo, hi = (np.asarray(a, dtype=np.float64) for a in (x, lo, hi))
    span = hi - lo
    safe = np.where(span > 0, span, 1.0)
    return np.where(span > 0, 2.0 * (x - lo) / safe - 1.0, 0.0)


def unscale_by(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The values :func:`scale_by` mapped from: a zero-width column reads its ``lo`` (its one value).

    Args:
        x: a ``[n, d]`` matrix of scaled values.
        lo, hi: ``[d]`` the ends it was scaled by.

    Returns:
        A new float64 ``[n, d]`` matrix.
    """
    x, lo, hi = (np.asarray(a, dtype=np.float64) for a in (x, lo, hi))
    return np.where(hi > lo, (x + 1.0) / 2.0 * (hi - lo) + lo, lo)


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
