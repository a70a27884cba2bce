"""A what-if verification job as its console page shows it: plain text (the template escapes it), the estimate and
the measured effect side by side, and the verdict against chance in words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from app.console.views import left_in_words
from app.core.db.tables import Audit, Tenant, WhatIf
from app.what_ifs.service import list_jobs
from bind_core.reporting import fmt

SHOWN = 10

METRICS = (
    ("delta", "ΔΓ (the bias)"),
    ("delta_sp", "ΔΓ_SP (statistical parity)"),
    ("delta_eo", "ΔΓ_EO (equal opportunity)"),
)


def _signed(value: Any) -> str:
    return f"{value:+.4f}" if isinstance(value, int | float) else "—"


def _rows(estimate: Mapping[str, Any], result: Mapping[str, Any]) -> list[list[str]]:
    """One row per metric: its name, the estimate, the measured mean ± spread over the seeds."""
    rows = []
    for key, name in METRICS:
        measured = result.get(key) or {}
        spread = f"{_signed(measured.get('mean'))} ± {fmt(measured.get('std'), 4)}" if measured else "—"
        rows.append([name, _signed(estimate.get(key)), spread])
    return rows


def _summary(job: WhatIf, result: Mapping[str, Any]) -> str:
    """The outcome in one sentence: what the estimate said, what retraining did."""
    estimated, measured = job.estimate.get("delta"), (result.get("delta") or {}).get("mean")
    seeds = len(result.get("seeds") or job.seeds)
    said = (
        f"The estimate said deleting these {job.size} training nodes would change the bias Γ by {_signed(estimated)}"
        if isinstance(estimated, int | float)
        else f"The estimate has no value for deleting these {job.size} training nodes (a member's deletion has no "
        "minimum near the audited weights)"
    )
    return f"{said}; deleting them and retraining with {seeds} seeds changed it by {_signed(measured)} on average."


def job_view(job: WhatIf) -> dict[str, Any]:
    """What the job's page shows.

    Args:
        job: the what-if job.

    Returns:
        ``id``, ``state``, ``running``, ``percent``, ``size``, ``nodes`` (the user's ids, as text), ``seeds``,
        ``random_sets``, ``chosen`` (how, in words), ``error`` (a failed job's detail) and, when succeeded, ``rows``
        (metric, estimated, measured), ``summary`` and ``verdict``.
    """
    chosen = job.chosen_by or {}
    how = (
        f"the nodes of the rule “{'; '.join(chosen.get('conditions') or [])}”"
        if chosen.get("rule") is not None
        else f"the top {chosen['top']} most harmful"
        if chosen.get("top") is not None
        else "the node ids you gave"
    )
    view: dict[str, Any] = {
        "id": str(job.id),
        "state": job.state,
        "running": job.state in ("queued", "running"),
        "percent": f"{100 * (job.progress or 0):.0f}",
        **left_in_words(job.state, job.pace),
        "size": job.size,
        "nodes": ", ".join(str(n) for n in job.nodes),
        "seeds": ", ".join(str(s) for s in job.seeds),
        "random_sets": job.random_sets,
        "chosen": how,
        "error": (job.error or {}).get("detail") if job.state == "failed" else None,
        "estimate_note": job.estimate.get("note"),
        "rows": None,
    }
    if job.state == "succeeded" and job.result:
        chance = job.result.get("chance") or {}
        view |= {
            "rows": _rows(job.estimate, job.result),
            "summary": _summary(job, job.result),
            "verdict": chance.get("verdict"),
            "random_mean": _signed(chance.get("random_mean")),
            "beats_random": chance.get("beats_random"),
        }
    return view


def verification_rows(session: Session, tenant: Tenant, audit: Audit) -> list[dict[str, str]]:
    """The audit's latest what-if verifications, for its page: ``id``, ``state``, ``size`` and ``created``.

    Args:
        session: the request's session.
        tenant: the signed-in tenant.
        audit: the audit.

    Returns:
        Up to :data:`SHOWN` rows, newest first.
    """
    rows, _ = list_jobs(session, tenant, audit.id, limit=SHOWN, page_token=None)
    return [
        {"id": str(j.id), "state": j.state, "size": str(j.size), "created": j.created_at.strftime("%Y-%m-%d %H:%M")}
        for j in rows
    ]
