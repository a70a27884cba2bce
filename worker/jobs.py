"""The worker's writes to an audit row. Every write after the claim is fenced on this attempt.

The claim is one conditional ``UPDATE``: it moves a ``queued`` audit (or a ``running`` one whose heartbeat
is stale, i.e. whose worker died) to ``running`` and increments ``attempts``. The new ``attempts`` value is
the attempt's fencing token: later writes match ``state='running' AND attempts=<token>``, so a cancelled
audit, or one another worker has since taken over, is never overwritten.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import CursorResult, Executable, and_, delete, insert, or_, select, update
from sqlalchemy.orm import Session

from app.db.models import Audit, Graph, InfluencePlanRecord, InfluenceRow, SuppliedModel
from worker.progress import Lease


@dataclass(frozen=True)
class Claim:
    """An attempt at an audit this worker now owns."""

    audit_id: uuid.UUID
    attempt: int
    graph_id: uuid.UUID | None
    dataset: str | None
    config: dict[str, Any]
    model_id: uuid.UUID | None = None
    """A supplied model to audit instead of training one."""


def now() -> datetime:
    return datetime.now(UTC)


def claim(
    session: Session, audit_id: uuid.UUID, *, device: str, heartbeat_timeout: float, max_attempts: int
) -> Claim | None:
    """Take the audit for this worker, or return ``None`` when it is not ours to run.

    Not ours: it is finished or cancelled (a redelivered message: no-op), another worker is running it
    with a fresh heartbeat, or its dead worker used up the last attempt (the sweeper fails it).
    """
    t = now()
    stale = t - timedelta(seconds=heartbeat_timeout)
    values = dict(
        state="running", attempts=Audit.attempts + 1, device=device, stage=None, progress=0.0,
        error=None, started_at=t, heartbeat_at=t, finished_at=None, updated_at=t,
    )  # fmt: skip
    row = session.execute(
        update(Audit)
        .where(
            Audit.id == audit_id,
            or_(
                Audit.state == "queued",
                and_(
                    Audit.state == "running",
                    Audit.attempts < max_attempts,
                    or_(Audit.heartbeat_at.is_(None), Audit.heartbeat_at < stale),
                ),
            ),
        )
        .values(**values)
        .returning(Audit.attempts, Audit.graph_id, Audit.dataset, Audit.config, Audit.model_id)
    ).one_or_none()
    if row is None:
        return None
    return Claim(audit_id, row.attempts, row.graph_id, row.dataset, row.config, row.model_id)


def rowcount(session: Session, statement: Executable) -> int:
    result = session.execute(statement)
    assert isinstance(result, CursorResult)
    return result.rowcount


def graph_bytes(session: Session, graph_id: uuid.UUID) -> bytes | None:
    """The stored npz of an uploaded graph (``None`` if it was deleted)."""
    return session.scalar(select(Graph.data).where(Graph.id == graph_id))


def model_parts(session: Session, model_id: uuid.UUID) -> tuple[bytes, dict[str, Any]] | None:
    """The stored safetensors weights and config of a supplied model (``None`` if it was deleted)."""
    row = session.execute(
        select(SuppliedModel.weights, SuppliedModel.config).where(SuppliedModel.id == model_id)
    ).one_or_none()
    return None if row is None else (row.weights, row.config)


def _fence(claim: Claim) -> Any:
    return and_(Audit.id == claim.audit_id, Audit.state == "running", Audit.attempts == claim.attempt)


def _lease_after_miss(session: Session, claim: Claim) -> Lease:
    state = session.scalar(select(Audit.state).where(Audit.id == claim.audit_id))
    return Lease.CANCELLED if state == "cancelled" else Lease.LOST


def beat(session: Session, claim: Claim, stage: str | None, progress: float | None) -> Lease:
    """Touch ``heartbeat_at`` (and stage and progress when given); say whether the audit is still ours."""
    t = now()
    values: dict[str, Any] = {"heartbeat_at": t, "updated_at": t}
    if stage is not None:
        values["stage"] = stage
    if progress is not None:
        values["progress"] = progress
    hit = rowcount(session, update(Audit).where(_fence(claim)).values(**values))
    return Lease.HELD if hit else _lease_after_miss(session, claim)


def succeed(
    session: Session,
    claim: Claim,
    *,
    results: dict[str, Any],
    weights: bytes | None,
    model_config: dict[str, Any] | None,
    influence: list[dict[str, Any]],
) -> Lease:
    """Store everything an attempt produced and mark the audit ``succeeded``, in the caller's transaction.

    The fenced ``UPDATE`` goes first: on Postgres it locks the row, so a concurrent cancel waits and then
    finds the audit finished. Influence rows of an earlier, interrupted attempt are replaced. On a miss
    nothing has been written, so the caller may commit either way.
    """
    t = now()
    values = dict(
        state="succeeded", stage=None, progress=1.0, results=results, model_weights=weights,
        model_config=model_config, error=None, finished_at=t, heartbeat_at=t, updated_at=t,
    )  # fmt: skip
    hit = rowcount(session, update(Audit).where(_fence(claim)).values(**values))
    if not hit:
        return _lease_after_miss(session, claim)
    session.execute(delete(InfluenceRow).where(InfluenceRow.audit_id == claim.audit_id))
    if influence:
        session.execute(insert(InfluenceRow), [_influence_row(claim.audit_id, r) for r in influence])
    return Lease.HELD


def _influence_row(audit_id: uuid.UUID, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "audit_id": audit_id,
        "position": int(row["position"]),
        "node_index": int(row["node_index"]),
        "node_id": int(row["node_id"]),
        "grp": int(row["group"]),
        "label": int(row["label"]),
        "delta": float(row["delta"]),
        "delta_sp": float(row["delta_sp"]),
        "delta_eo": float(row["delta_eo"]),
    }


def fail(session: Session, claim: Claim, problem: dict[str, Any]) -> Lease:
    """Mark the audit ``failed`` with ``problem`` (an RFC 9457 document) and drop what was left half-made."""
    t = now()
    values = dict(state="failed", error=problem, finished_at=t, heartbeat_at=t, updated_at=t)
    hit = rowcount(session, update(Audit).where(_fence(claim)).values(**values))
    if hit:
        discard_partial(session, claim.audit_id)
    return Lease.HELD if hit else _lease_after_miss(session, claim)


def discard_partial(session: Session, audit_id: uuid.UUID) -> None:
    """Delete an unfinished audit's partial artefacts: a distributed estimate's plan with its chunks (their
    tasks then find no plan and do nothing) and influence rows an earlier attempt may have left."""
    session.execute(delete(InfluencePlanRecord).where(InfluencePlanRecord.audit_id == audit_id))
    session.execute(delete(InfluenceRow).where(InfluenceRow.audit_id == audit_id))


def close_cancelled(session: Session, claim: Claim) -> None:
    """Stamp ``finished_at`` on an audit cancelled while this attempt ran (if the API did not), and drop what
    was left half-made (`discard_partial`)."""
    discard_partial(session, claim.audit_id)
    t = now()
    session.execute(
        update(Audit)
        .where(Audit.id == claim.audit_id, Audit.state == "cancelled", Audit.finished_at.is_(None))
        .values(finished_at=t, updated_at=t)
    )
