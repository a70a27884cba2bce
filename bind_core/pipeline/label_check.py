"""A label that is not a set of outcomes: many classes with few nodes each (a continuous column such as an income
chosen as the label). The audit still runs, but its fairness figures then compare how often the groups are predicted
single values (``income=53.12``), which no one means by fairness: the warning and the verdict say so."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["FEW_PER_CLASS", "MANY_CLASSES", "many_classes"]

MANY_CLASSES = 10
"""More classes than this, with few labelled nodes each, and the label is said to be many single values."""
FEW_PER_CLASS = 30
"""A median class below this many labelled nodes holds too few for a class's rates to mean anything."""


def _number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def many_classes(label: str | None, class_names: Sequence[str], class_sizes: Sequence[int]) -> str | None:
    """The sentence that says a label has many classes with few labelled nodes each (more than
    :data:`MANY_CLASSES`, the median below :data:`FEW_PER_CLASS`), and that its values look continuous where every
    class is a number; ``None`` for a label of a few classes.

    Args:
        label: the label's column (``None``: ``y``).
        class_names: each class's value as the user's file writes it (empty: the codes).
        class_sizes: labelled nodes per class.
    """
    k = len(class_sizes)
    if k <= MANY_CLASSES:
        return None
    sizes = sorted(class_sizes)
    median = sizes[k // 2] if k % 2 else (sizes[k // 2 - 1] + sizes[k // 2]) / 2
    if median >= FEW_PER_CLASS:
        return None
    names = list(class_names) or [str(c) for c in range(k)]
    column = label or "y"
    looks = "; its values look continuous" if all(_number(n) for n in names) else ""
    return (
        f"the label {column!r} has {k} classes with a median of {median:g} labelled node(s) each{looks}: the "
        f"fairness figures compare how often the groups are predicted single values such as {column}={names[-1]}, "
        "and a class's rates rest on a handful of nodes; map the values to two classes first (e.g. above or below a "
        "threshold) to audit a yes-or-no outcome"
    )
