"""What-if verification jobs: creating them (queued, the task sent after the commit), reading, listing and
cancelling them. The row is the job's truth, as for audits (``app.audits.service``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session, defer

from app.core.db.base import utcnow
from app.core.db.session import after_commit
from app.core.db.tables import ACTIVE_STATES, Audit, Tenant, WhatIf
from app.core.errors import Conflict, NotFound, ValidationProblem
from app.core.pagination import newest_first
from app.core.publisher import Publisher
from app.influence.what_if import ChosenSet
from app.what_ifs.tasks import send_verify
from bind_core import AuditConfig
from bind_core.codec import encode
from bind_core.pipeline import verify_seeds

MAX_SHARE = 0.5
"""At most this share of the training nodes may be deleted: the random sets it is judged against are drawn from the
training nodes, and beyond half the comparison says little."""


def check_verifiable(session: Session, audit: Audit) -> None:
    """Refuse (409) to verify a what-if of an audit that did not succeed, stored no model, or lost its graph.

    Args:
        session: the request's session.
        audit: the tenant's audit.

    Raises:
        Conflict: ``audit-not-succeeded``, ``model-not-stored`` or ``graph-deleted``.
    """
    if audit.state != "succeeded":
        raise Conflict(
            f"Audit {audit.id} is {audit.state}; only a succeeded audit's what-if can be verified.",
            slug="audit-not-succeeded",
            title="Audit not succeeded",
        )
    stored = session.scalar(select(Audit.id).where(Audit.id == audit.id, Audit.model_weights.is_not(None)))
    if stored is None or audit.model_config is None:
        raise Conflict(
            f"Audit {audit.id} kept no model weights to retrain.", slug="model-not-stored", title="No stored model"
        )
    if audit.graph_id is None and audit.dataset is None:
        raise Conflict(
            f"The graph audit {audit.id} ran on was deleted.", slug="graph-deleted", title="The graph was deleted"
        )


def create_job(
    session: Session,
    tenant: Tenant,
    audit: Audit,
    chosen: ChosenSet,
    *,
    chosen_by: dict[str, Any],
    seeds: Sequence[int] | None,
    random_sets: int | None,
    publisher: Publisher,
) -> WhatIf:
    """Insert a queued verification of ``chosen`` and send its task after the commit.

    Args:
        chosen_by: how the set was chosen (stored and served as ``chosen_by``).
        seeds: the training seeds (default: the audit's ``debias_seeds``, else ``AUTO_CHANCE_SEEDS``).
        random_sets: random sets of the same size to compare with (default 3).

    Returns:
        The new job.

    Raises:
        Conflict: see :func:`check_verifiable`.
        ValidationProblem: the set is over :data:`MAX_SHARE` of the training nodes (``too-many-nodes``).
    """
    check_verifiable(session, audit)
    size, limit = len(chosen.positions), int(chosen.train_size * MAX_SHARE)
    if size > limit:
        message = f"{size} nodes; at most {limit} (half of the {chosen.train_size} training nodes) can be verified"
        raise ValidationProblem(
            f"The set is too large to verify: {message}.",
            slug="too-many-nodes",
            title="Too many nodes to verify",
            errors=[{"field": "nodes", "message": message}],
        )
    job = WhatIf(
        tenant_id=tenant.id,
        audit_id=audit.id,
        chosen_by=chosen_by,
        positions=chosen.positions,
        nodes=list(chosen.estimate.nodes),
        estimate={k: v for k, v in encode(chosen.estimate).items() if k != "nodes"},
        seeds=list(seeds) if seeds else list(verify_seeds(AuditConfig.from_dict(audit.config))),
        random_sets=3 if random_sets is None else random_sets,
        state="queued",
        progress=0.0,
        attempts=0,
    )
    session.add(job)
    session.flush()
    job_id = job.id
    after_commit(session, lambda: send_verify(publisher, job_id))
    return job


def get_job(session: Session, tenant: Tenant, audit_id: uuid.UUID, job_id: uuid.UUID) -> WhatIf:
    """The tenant's what-if job of the audit, or 404 (also for another tenant's or another audit's)."""
    job = session.scalar(
        select(WhatIf).where(WhatIf.id == job_id, WhatIf.audit_id == audit_id, WhatIf.tenant_id == tenant.id)
    )
    if job is None:
        raise NotFound("what-if", job_id)
    return job


def list_jobs(
    session: Session, tenant: Tenant, audit_id: uuid.UUID, *, limit: int, page_token: str | None
) -> tuple[list[WhatIf], str | None]:
    """The audit's what-if jobs, newest first, a page at a time (the large JSON columns left in the database)."""
    stmt = (
        select(WhatIf)
        .options(defer(WhatIf.result), defer(WhatIf.estimate), defer(WhatIf.nodes))
        .where(WhatIf.tenant_id == tenant.id, WhatIf.audit_id == audit_id)
    )
    return newest_first(session, stmt, WhatIf, kind="what-ifs", limit=limit, token=page_token)


def cancel_job(session: Session, tenant: Tenant, audit_id: uuid.UUID, job_id: uuid.UUID) -> WhatIf:
    """Mark a queued or running job ``cancelled`` (the worker stops at its next progress report).

    Cancelling a cancelled job is a no-op. Raises NotFound, or Conflict (``what-if-finished``) when it finished.
    """
    now = utcnow()
    result: CursorResult[Any] = session.execute(  # type: ignore[assignment]  # DML gives a CursorResult
        update(WhatIf)
        .where(
            WhatIf.id == job_id,
            WhatIf.audit_id == audit_id,
            WhatIf.tenant_id == tenant.id,
            WhatIf.state.in_(ACTIVE_STATES),
        )
        .values(state="cancelled", finished_at=now, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    job = session.scalar(
        select(WhatIf)
        .where(WhatIf.id == job_id, WhatIf.audit_id == audit_id, WhatIf.tenant_id == tenant.id)
        .execution_options(populate_existing=True)
    )
    if job is None:
        raise NotFound("what-if", job_id)
    if result.rowcount == 0 and job.state != "cancelled":
        raise Conflict(
            f"The what-if already {job.state}; only queued or running ones can be cancelled.",
            slug="what-if-finished",
            title="What-if already finished",
        )
    return job
