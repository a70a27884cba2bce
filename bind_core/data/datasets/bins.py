"""Binning rules that make named sensitive groups from a numeric column: ``"age>=25"`` or ``"age:25,60"``.

* ``col>=t`` (also ``>``, ``<=``, ``<``): two groups, ``col<t`` and ``col>=t`` (for ``>`` and ``<=``:
  ``col<=t`` and ``col>t``), named with ``t`` as written.
* ``col:e1,e2,...`` (increasing edges): ``col<e1``, ``e1<=col<e2``, ..., ``col>=ek``.

Groups are in increasing order of the values; a bin no node falls in is not a group.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bind_core.data.datasets.offending import cell_error, table_rows
from bind_core.errors import GraphValidationError

_THRESHOLD = re.compile(r"^\s*(?P<column>.+?)\s*(?P<op>>=|<=|>|<)\s*(?P<value>[^<>=\s]+)\s*$")


@dataclass(frozen=True)
class BinRule:
    """Increasing bin edges of one column; ``right`` puts a value equal to an edge in the lower bin."""

    column: str
    edges: tuple[float, ...]
    labels: tuple[str, ...]
    right: bool = False

    def names(self) -> list[str]:
        """One name per bin, lowest first."""
        c, e, right = self.column, self.labels, self.right
        lo, hi = ("<=", "<") if right else ("<", "<=")
        inner = [f"{e[i]}{hi}{c}{lo}{e[i + 1]}" for i in range(len(e) - 1)]
        return [f"{c}{lo}{e[0]}", *inner, f"{c}{'>' if right else '>='}{e[-1]}"]


def parse_bins(rules: str | Sequence[str] | None) -> dict[str, BinRule]:
    """Parse binning rules (a list, or one string with rules separated by ``;``), by column.

    Raises:
        GraphValidationError: a rule that is neither form, a number that is not one, edges not increasing, or
            a column binned twice.
    """
    if rules is None:
        return {}
    parts = [r for r in (rules.split(";") if isinstance(rules, str) else rules) if r.strip()]
    out: dict[str, BinRule] = {}
    for text in parts:
        rule = _parse_one(text)
        if rule.column in out:
            raise GraphValidationError(
                "sensitive_bins", f"column {rule.column!r} has two binning rules", value=text, column=rule.column
            )
        out[rule.column] = rule
    return out


def _parse_one(text: str) -> BinRule:
    match = _THRESHOLD.match(text)
    if match:
        column, op, value = match["column"], match["op"], match["value"]
        return BinRule(column, (_number(value, text),), (value,), right=op in (">", "<="))
    column, sep, edges = text.rpartition(":")
    labels = tuple(e.strip() for e in edges.split(",") if e.strip())
    if not sep or not column.strip() or not labels:
        raise GraphValidationError(
            "sensitive_bins", f"cannot read the binning rule {text!r}; write e.g. 'age>=25' or 'age:25,60'", value=text
        )
    numbers = tuple(_number(v, text) for v in labels)
    if any(b <= a for a, b in itertools.pairwise(numbers)):
        raise GraphValidationError("sensitive_bins", f"the bin edges of {text!r} must increase", value=text)
    return BinRule(column.strip(), numbers, labels)


def _number(value: str, rule: str) -> float:
    try:
        number = float(value)
    except ValueError as exc:
        raise GraphValidationError(
            "sensitive_bins", f"{value!r} in the rule {rule!r} is not a number", value=rule
        ) from exc
    if not np.isfinite(number):
        message = f"{value!r} in the rule {rule!r} is not a finite number"
        raise GraphValidationError("sensitive_bins", message, value=rule)
    return number


def apply_bins(series: pd.Series, rule: BinRule, *, file: str) -> tuple[np.ndarray, list[str]]:
    """Group codes ``0..k-1`` of the bins that occur, and their names.

    Raises:
        GraphValidationError: the column holds values that are not numbers, or missing values.
    """
    values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise cell_error(
            "nodes",
            "values that are not numbers (a binning rule needs numbers)",
            file=file,
            column=rule.column,
            rows=table_rows(bad),
            values=series.iloc[bad[:5]].tolist(),
        )
    bins = np.searchsorted(np.asarray(rule.edges), values, side="left" if rule.right else "right")
    present, codes = np.unique(bins, return_inverse=True)
    names = rule.names()
    return codes.astype(np.int64).reshape(-1), [names[int(b)] for b in present]
