"""Exact parsing of integer tokens (64-bit node ids, positions written as ``7``, ``7.0`` or ``1.0e+02``)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import numpy as np
import pandas as pd

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def exact_integer(token: object) -> int | None:
    """The integer a token writes exactly, or ``None``.

    ``"725731259612196864"``, ``"7.0"``, ``"1.0e+02"`` and ``" 7 "`` are integers; ``"7.5"``, ``"nan"``,
    ``"1_000"``, non-ASCII digits, ``""`` and anything outside int64 are not. No float64 is involved, so ids
    of 2^53 and above are exact.
    """
    if isinstance(token, bool):
        return None
    if isinstance(token, int | np.integer):
        value = int(token)
    elif isinstance(token, float | np.floating):
        if not np.isfinite(token) or token != np.round(token):
            return None
        value = int(token)
    else:
        text = str(token).strip()
        if not text or "_" in text or not text.isascii():
            return None
        try:
            value = int(text)
        except ValueError:
            try:
                number = Decimal(text)
            except InvalidOperation:
                return None
            if not number.is_finite() or number != number.to_integral_value():
                return None
            value = int(number)
    return value if INT64_MIN <= value <= INT64_MAX else None


def parse_integers(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parse tokens exactly as int64 (see :func:`exact_integer`).

    Plain decimal integers (ASCII digits) take numpy's vectorised conversion; only other tokens go one by one.

    Returns:
        ``(values, ok)``: int64 values (0 where not an integer) and the mask of tokens that are integers.
    """
    shape = np.shape(tokens)
    flat = pd.Series(np.asarray(tokens, dtype=object).reshape(-1), dtype=object).astype(str).str.strip()
    plain = flat.str.fullmatch(r"[+-]?[0-9]{1,18}").to_numpy(dtype=bool)
    values = np.zeros(flat.size, dtype=np.int64)
    ok = plain.copy()
    if plain.any():
        values[plain] = flat[plain].to_numpy(dtype=str).astype(np.int64)
    rest = np.flatnonzero(~plain)
    for i in rest.tolist():
        parsed = exact_integer(flat.iat[i])
        if parsed is not None:
            values[i], ok[i] = parsed, True
    return values.reshape(shape), ok.reshape(shape)
