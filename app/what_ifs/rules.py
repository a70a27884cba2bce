"""Choosing a what-if's set by one of the audit's profile rules (``results.profile.rules``): the rule's members, kept
in the results as positions in the training split, in the user's ids."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.db.tables import Audit, InfluenceRow
from app.core.errors import Conflict, ValidationProblem


def audit_rules(audit: Audit) -> list[dict[str, Any]]:
    """The audit's profile rules (empty without a profile)."""
    profile = (audit.results or {}).get("profile") or {}
    rules = profile.get("rules") or []
    return [r for r in rules if isinstance(r, dict)]


def rule_choice(session: Session, audit: Audit, index: int) -> tuple[list[int | str], dict[str, Any]]:
    """The members of the audit's profile rule ``index`` (the user's ids, in training order) and how they were
    chosen (``{"rule": index, "conditions": [...]}``).

    Args:
        session: the request's session.
        audit: the tenant's audit.
        index: the rule's place in ``results.profile.rules``.

    Returns:
        ``(ids, chosen_by)``.

    Raises:
        Conflict: the audit has no profile yet (``influence-not-ready``), or was stored before rules kept their
            members (``rule-members-not-stored``).
        ValidationProblem: no rule ``index``; a rule without members.
    """
    if not audit.results or "profile" not in audit.results:
        raise Conflict(
            f"Audit {audit.id} has no profile of its training nodes yet.",
            slug="influence-not-ready",
            title="No influence estimates yet",
        )
    rules = audit_rules(audit)
    if not 0 <= index < len(rules):
        message = f"there is no rule {index}; the audit's profile has {len(rules)} rule(s)"
        raise ValidationProblem(f"rule: {message}.", errors=[{"field": "rule", "message": message}])
    members = rules[index].get("members")
    if not isinstance(members, list):
        raise Conflict(
            f"Audit {audit.id} was stored before its rules kept their members; run the audit again to choose by rule.",
            slug="rule-members-not-stored",
            title="Rule members not stored",
        )
    if not members:
        message = f"rule {index} covers no training node"
        raise ValidationProblem(f"rule: {message}.", errors=[{"field": "rule", "message": message}])
    row = InfluenceRow
    stmt = (
        select(row.node_id, row.node_key)
        .where(row.audit_id == audit.id, row.position.in_([int(p) for p in members]))
        .order_by(row.position)
    )
    ids: list[int | str] = [key if key is not None else nid for nid, key in session.execute(stmt)]
    conditions = [str(c.get("text", "")) for c in rules[index].get("conditions") or [] if isinstance(c, dict)]
    return ids, {"rule": index, "conditions": conditions}
