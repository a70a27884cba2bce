"""The worker's writes to a what-if job row; every write after the claim is fenced on the attempt (as for audits,
``app.audits.repository``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from app.core.db.session import now, rowcount
from app.core.db.tables import WhatIf
from app.core.lease import Lease


@dataclass(frozen=True)
class JobClaim:
    """An attempt at a what-if job this worker now owns."""

    job_id: uuid.UUID
    attempt: int
    audit_id: uuid.UUID
    positions: list[int]
    seeds: list[int]
    random_sets: int


def claim(
    session: Session, job_id: uuid.UUID, *, device: str, heartbeat_timeout: float, max_attempts: int
) -> JobClaim | None:
    """Take the job if it is queued, or running with a stale heartbeat (its worker died) and attempts left.

    Args:
        session: a session in a transaction.
        job_id: the message's job.
        device: where it will run.
        heartbeat_timeout: seconds after which a running job's worker is presumed dead.
        max_attempts: attempts a job gets in all.

    Returns:
        The claim, or ``None`` when nothing is ours to run (finished, cancelled, or running elsewhere).
    """
    t = now()
    stale = or_(WhatIf.heartbeat_at.is_(None), WhatIf.heartbeat_at < t - timedelta(seconds=heartbeat_timeout))
    takeable = or_(WhatIf.state == "queued", and_(WhatIf.state == "running", WhatIf.attempts < max_attempts, stale))
    values = dict(
        state="running",
        attempts=WhatIf.attempts + 1,
        device=device,
        progress=0.0,
        pace=None,
        error=None,
        started_at=t,
        heartbeat_at=t,
        updated_at=t,
    )
    row = session.execute(
        update(WhatIf)
        .where(WhatIf.id == job_id, takeable)
        .values(**values)
        .returning(WhatIf.attempts, WhatIf.audit_id, WhatIf.positions, WhatIf.seeds, WhatIf.random_sets)
    ).one_or_none()
    if row is None:
        return None
    return JobClaim(job_id, row.attempts, row.audit_id, list(row.positions), list(row.seeds), int(row.random_sets))


def _fence(claim: JobClaim) -> Any:
    return and_(WhatIf.id == claim.job_id, WhatIf.state == "running", WhatIf.attempts == claim.attempt)


def _lease_after_miss(session: Session, claim: JobClaim) -> Lease:
    state = session.scalar(select(WhatIf.state).where(WhatIf.id == claim.job_id))
    return Lease.CANCELLED if state in ("cancelled", None) else Lease.LOST


def beat(session: Session, claim: JobClaim, progress: float | None, pace: dict[str, Any] | None = None) -> Lease:
    """Touch ``heartbeat_at`` (and ``progress`` and ``pace`` when given); say whether the job is still ours."""
    t = now()
    values: dict[str, Any] = {"heartbeat_at": t, "updated_at": t}
    if progress is not None:
        values["progress"] = progress
    if pace is not None:
        values["pace"] = pace
    hit = rowcount(session, update(WhatIf).where(_fence(claim)).values(**values))
    return Lease.HELD if hit else _lease_after_miss(session, claim)


def finish(session: Session, claim: JobClaim, *, result: dict[str, Any] | None, error: dict[str, Any] | None) -> Lease:
    """Mark the job ``succeeded`` with ``result``, or ``failed`` with ``error`` (a problem document)."""
    t = now()
    state = "failed" if error is not None else "succeeded"
    values: dict[str, Any] = dict(state=state, result=result, error=error, finished_at=t, heartbeat_at=t, updated_at=t)
    if error is None:
        values["progress"] = 1.0
    hit = rowcount(session, update(WhatIf).where(_fence(claim)).values(**values))
    return Lease.HELD if hit else _lease_after_miss(session, claim)


def close_cancelled(session: Session, claim: JobClaim) -> None:
    """Stamp ``finished_at`` on a job cancelled while this attempt ran (if the API did not)."""
    t = now()
    session.execute(
        update(WhatIf)
        .where(WhatIf.id == claim.job_id, WhatIf.state == "cancelled", WhatIf.finished_at.is_(None))
        .values(finished_at=t, updated_at=t)
    )
