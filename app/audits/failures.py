"""RFC 9457 problem documents recorded on an audit that failed. Never a stack trace: that goes to the log."""

from __future__ import annotations

from typing import Any

from app.audits.budget import ResourceLimitExceeded
from app.audits.guard import LimitExceeded
from app.core.errors import ProblemError, bind_error_problem
from bind_core import BindError


def problem_for(exc: BaseException, *, audit_id: str, stage: str | None = None) -> dict[str, Any]:
    """The problem document that explains why an audit failed.

    `bind_core` errors are the caller's fault (status 422) and their message is safe to show: it names the
    field and the bad value (the mapping the API uses too, :func:`app.core.errors.bind_error_problem`). Any
    other exception is ours (status 500) and only its type is shown.

    Args:
        exc: what loading the graph or `run_audit` raised.
        audit_id: the audit, used as the problem's ``instance``.
        stage: the stage that was running, when known.

    Returns:
        ``{"type", "title", "status", "detail", "instance"}``, plus ``"errors"`` for a graph error and
        ``"stage"`` when known.
    """
    error: ProblemError
    if isinstance(exc, LimitExceeded):
        limit = {"limit": exc.limit, "allowed": exc.allowed, "used": exc.used, "excess": exc.used - exc.allowed}
        error = ResourceLimitExceeded(str(exc), limits=[limit])
    elif isinstance(exc, ProblemError):
        error = exc
    elif isinstance(exc, BindError):
        error = bind_error_problem(exc)
    else:
        detail = f"The worker hit an internal error ({type(exc).__name__}); its log has the details."
        error = ProblemError(detail, status=500, title="Audit failed", slug="audit-internal-error")
    doc = error.to_problem(instance=f"/v1/audits/{audit_id}")
    if stage is not None:
        doc["stage"] = stage
    return doc
