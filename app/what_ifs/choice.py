"""A what-if's set as the API and the console take it: the user's ids, the top k most harmful, or a profile rule's
members; with how it was chosen, as a verification job records it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from app.core.db.tables import Audit
from app.core.errors import ValidationProblem
from app.influence.what_if import ChosenSet, choose_set
from app.what_ifs.rules import rule_choice


def choose(
    session: Session, audit: Audit, *, nodes: Sequence[int | str] | None, top: int | None, rule: int | None
) -> tuple[ChosenSet, dict[str, Any]]:
    """The chosen set and its estimate, and how it was chosen (``{"nodes": n}``, ``{"top": k}`` or
    ``{"rule": i, "conditions": [...]}``).

    Args:
        session: the request's session.
        audit: the tenant's audit.
        nodes: the user's ids.
        top: the number of most harmful nodes.
        rule: a profile rule's index.

    Returns:
        ``(chosen, chosen_by)``.

    Raises:
        ProblemError: as :func:`app.influence.what_if.choose_set` and :func:`app.what_ifs.rules.rule_choice`; more
            or fewer than one of the three is a 422.
    """
    given = [name for name, value in (("nodes", nodes), ("top", top), ("rule", rule)) if value is not None]
    if len(given) != 1:  # said here, with all three: bind_core's choose knows only nodes and top
        message = "nodes, top or rule: give exactly one of them"
        raise ValidationProblem(message, errors=[{"field": f, "message": message} for f in given or ["body"]])
    chosen_by: dict[str, Any] = {"nodes": len(nodes)} if nodes is not None else {"top": top}
    if rule is not None:
        nodes, chosen_by = rule_choice(session, audit, rule)
    return choose_set(session, audit, nodes=nodes, top=top), chosen_by
