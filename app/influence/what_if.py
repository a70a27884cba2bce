"""The what-if of an audit: the estimate of deleting a chosen set of its training nodes at once, from its stored
per-node estimates (:mod:`bind_core.debiasing.what_if`), in the user's ids."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.core.db.tables import Audit
from app.core.errors import ValidationProblem
from app.influence.rows import all_influence_rows
from bind_core import BindError
from bind_core.pipeline import SetEstimate, choose, estimate_set


@dataclass(frozen=True)
class ChosenSet:
    """A what-if's chosen set: its places in the audit's training nodes, the estimate, and the training set's size."""

    positions: list[int]
    estimate: SetEstimate
    """The set's estimate (``nodes``: the user's ids, in the same order)."""
    train_size: int


def estimate_deletion(
    session: Session, audit: Audit, *, nodes: Sequence[int | str] | None, top: int | None
) -> SetEstimate:
    """The estimate of deleting the chosen set (:class:`bind_core.debiasing.what_if.SetEstimate`).

    Raises:
        Conflict: the audit has no influence estimates (``influence-not-ready``).
        ValidationProblem: the choice is empty, ambiguous, or names ids that are not training nodes (field named).
    """
    return choose_set(session, audit, nodes=nodes, top=top).estimate


def choose_set(session: Session, audit: Audit, *, nodes: Sequence[int | str] | None, top: int | None) -> ChosenSet:
    """The chosen set of the audit's training nodes (the user's ids in ``nodes``, or the ``top`` most harmful) and
    its estimate.

    Returns:
        The :class:`ChosenSet`.

    Raises:
        Conflict: the audit has no influence estimates (``influence-not-ready``).
        ValidationProblem: the choice is empty, ambiguous, or names ids that are not training nodes (field named).
    """
    rows = all_influence_rows(session, audit, required=True)
    try:
        positions = choose(rows, nodes=nodes, top=top)
    except BindError as exc:
        field = "top" if str(exc).startswith("top") else "nodes"
        raise ValidationProblem(str(exc), errors=[{"field": field, "message": str(exc)}]) from exc
    summary = (audit.results or {}).get("influence_summary") or {}
    method = str((summary.get("solver_details") or {}).get("method") or "linear")
    estimate = estimate_set(rows, positions, method=method)
    return ChosenSet([rows[i].position for i in positions], estimate, len(rows))
