"""The console's what-if form: its fields read as a choice of training nodes, and the page that shows the estimate
(with the form again, and the button that verifies it)."""

from __future__ import annotations

from typing import Any

from fastapi.responses import Response

from app.console.deps import ConsoleUser
from app.console.pages import page
from app.core.db.tables import Audit
from app.core.errors import ProblemError, ValidationProblem
from app.what_ifs.rules import audit_rules


def _whole(field: str, value: str) -> int | None:
    if not value.strip():
        return None
    try:
        return int(value)
    except ValueError:
        message = f"{value!r} is not a whole number"
        raise ValidationProblem(f"{field}: {message}", errors=[{"field": field, "message": message}]) from None


def form_choice(form: dict[str, str]) -> dict[str, Any]:
    """The form's ``nodes`` (comma, space or newline separated ids), ``top`` and ``rule`` as a choice.

    Args:
        form: the submitted fields.

    Returns:
        ``nodes``, ``top`` and ``rule`` for :func:`app.what_ifs.choice.choose` (``None`` where left empty).

    Raises:
        ValidationProblem: ``top`` or ``rule`` is not a whole number.
    """
    ids: list[int | str] = [t for t in form.get("nodes", "").replace(",", " ").split() if t]
    top, rule = _whole("top", form.get("top", "")), _whole("rule", form.get("rule", ""))
    return {"nodes": ids or None, "top": top, "rule": rule}


def rule_options(audit: Audit) -> list[dict[str, Any]]:
    """The audit's profile rules for the form's choice: ``index`` and ``text``.

    Args:
        audit: the audit.

    Returns:
        One option per rule.
    """
    return [{"index": i, "text": str(r.get("text", f"rule {i}"))} for i, r in enumerate(audit_rules(audit))]


def what_if_page(
    user: ConsoleUser,
    audit: Audit,
    form: dict[str, str],
    *,
    estimate: dict[str, Any] | None,
    problem: ProblemError | None,
) -> Response:
    """The what-if page: the estimate (or the problem), the verify form under it, and the what-if form again.

    Args:
        user: the signed-in user.
        audit: the audit.
        form: the submitted fields (kept in the forms).
        estimate: the estimate, when there is one.
        problem: what went wrong, shown with its status.

    Returns:
        The page.
    """
    return page(
        "what_if.html",
        user,
        status_code=problem.status if problem else 200,
        title=f"What if · audit {audit.id} · bind-audit",
        audit_id=str(audit.id),
        estimate=estimate,
        detail=(problem.detail or problem.title) if problem else None,
        form=form,
        rule_options=rule_options(audit),
    )
