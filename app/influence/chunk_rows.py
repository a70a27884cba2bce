"""The rows of distributed influence: a stored plan and its chunks, claimed, beaten, stored and cleaned up.

Like `app.audits.repository` for audit rows: plain SQLAlchemy on a session the caller owns, every write fenced so that a
worker that lost a chunk (its lease expired and another worker took it) cannot overwrite it. `app.influence.chunks`
builds the computing and the coordination on top.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, delete, func, insert, or_, select, update
from sqlalchemy.orm import Session

from app.core.db.session import now, rowcount
from app.core.db.tables import Audit, InfluenceChunkRecord, InfluencePlanRecord


@dataclass(frozen=True)
class ChunkClaim:
    """A chunk this process now holds; ``token`` (the chunk's ``claims`` count) fences its heartbeats."""

    plan_id: uuid.UUID
    index: int
    start: int
    stop: int
    token: int
    worker: str
    device: str


@dataclass(frozen=True)
class PlanSource:
    """What a chunk task needs to know about a stored plan whose audit attempt is still running."""

    plan_id: uuid.UUID
    audit_id: uuid.UUID
    attempt: int
    graph_id: uuid.UUID | None
    dataset: str | None
    model_id: uuid.UUID | None = None
    """The audit's supplied model: on another version of its graph, the chunk reads that version as the attempt did
    (:func:`app.graphs.model_inputs.carry_model_inputs`)."""


@dataclass(frozen=True)
class DoneChunk:
    index: int
    start: int
    stop: int
    result: bytes
    worker: str | None
    device: str | None
    seconds: float | None
    claims: int


def create_plan(
    session: Session,
    *,
    audit_id: uuid.UUID,
    attempt: int,
    plan: bytes,
    weights: bytes,
    model_config: dict[str, Any],
    bounds: list[tuple[int, int]],
) -> uuid.UUID:
    """Store a plan and its pending chunks, in the caller's transaction; return the plan's id.

    Rows an earlier attempt at the audit left are deleted, and so are those of audits that are no longer
    running (an attempt that died, or an abandoned audit), so the tables hold only live estimates.
    """
    session.execute(delete(InfluencePlanRecord).where(InfluencePlanRecord.audit_id == audit_id))
    stale = select(Audit.id).where(Audit.id == InfluencePlanRecord.audit_id, Audit.state == "running").exists()
    session.execute(delete(InfluencePlanRecord).where(~stale))
    plan_id = uuid.uuid4()
    session.execute(
        insert(InfluencePlanRecord).values(
            id=plan_id,
            audit_id=audit_id,
            attempt=attempt,
            plan=plan,
            model_weights=weights,
            model_config=model_config,
            chunks=len(bounds),
            created_at=now(),
        )
    )
    session.execute(
        insert(InfluenceChunkRecord),
        [
            {"plan_id": plan_id, "idx": i, "start": a, "stop": b, "status": "pending", "claims": 0}
            for i, (a, b) in enumerate(bounds)
        ],
    )
    return plan_id


def plan_source(session: Session, plan_id: uuid.UUID) -> PlanSource | None:
    """The plan's audit, or ``None`` when the plan is gone or its attempt is over (finished, cancelled,
    taken over by a newer attempt): its chunks are then no one's business."""
    row = session.execute(
        select(InfluencePlanRecord.audit_id, InfluencePlanRecord.attempt, Audit.graph_id, Audit.dataset, Audit.model_id)
        .join(Audit, Audit.id == InfluencePlanRecord.audit_id)
        .where(
            InfluencePlanRecord.id == plan_id,
            Audit.state == "running",
            Audit.attempts == InfluencePlanRecord.attempt,
        )
    ).one_or_none()
    if row is None:
        return None
    return PlanSource(plan_id, row.audit_id, row.attempt, row.graph_id, row.dataset, row.model_id)


def plan_parts(session: Session, plan_id: uuid.UUID) -> tuple[bytes, bytes, dict[str, Any]] | None:
    """The stored plan, model weights and model config (``None`` when the plan is gone)."""
    row = session.execute(
        select(InfluencePlanRecord.plan, InfluencePlanRecord.model_weights, InfluencePlanRecord.model_config).where(
            InfluencePlanRecord.id == plan_id
        )
    ).one_or_none()
    return None if row is None else (row.plan, row.model_weights, row.model_config)


def _claimable(lease_timeout: float) -> Any:
    stale = now() - timedelta(seconds=lease_timeout)
    return or_(
        InfluenceChunkRecord.status == "pending",
        and_(
            InfluenceChunkRecord.status == "running",
            or_(InfluenceChunkRecord.heartbeat_at.is_(None), InfluenceChunkRecord.heartbeat_at < stale),
        ),
    )


def claim_chunk(
    session: Session,
    plan_id: uuid.UUID,
    *,
    worker: str,
    device: str,
    lease_timeout: float,
    index: int | None = None,
    newest_first: bool = False,
) -> ChunkClaim | None:
    """Claim chunk ``index`` of the plan (or any claimable one): ``pending``, or ``running`` with a heartbeat
    older than ``lease_timeout`` (its worker died). ``None`` when there is none.

    ``SELECT ... FOR UPDATE SKIP LOCKED`` on Postgres: concurrent claimers never wait on each other and never
    get the same row. ``newest_first`` takes the highest index (the coordinator, while the tasks, sent in
    index order, start from the lowest).
    """
    order = InfluenceChunkRecord.idx.desc() if newest_first else InfluenceChunkRecord.idx.asc()
    query = select(InfluenceChunkRecord.idx, InfluenceChunkRecord.start, InfluenceChunkRecord.stop).where(
        InfluenceChunkRecord.plan_id == plan_id, _claimable(lease_timeout)
    )
    if index is not None:
        query = query.where(InfluenceChunkRecord.idx == index)
    row = session.execute(query.order_by(order).limit(1).with_for_update(skip_locked=True)).one_or_none()
    if row is None:
        return None
    t = now()
    token = session.scalar(
        update(InfluenceChunkRecord)
        .where(InfluenceChunkRecord.plan_id == plan_id, InfluenceChunkRecord.idx == row.idx)
        .values(status="running", claims=InfluenceChunkRecord.claims + 1, worker=worker, device=device, heartbeat_at=t)
        .returning(InfluenceChunkRecord.claims)
    )
    assert token is not None
    return ChunkClaim(plan_id, row.idx, row.start, row.stop, token, worker, device)


def is_claimable(session: Session, plan_id: uuid.UUID, index: int, lease_timeout: float) -> bool:
    """Whether chunk ``index`` could be claimed now (a look without a lock, before loading a graph for it)."""
    query = select(InfluenceChunkRecord.idx).where(
        InfluenceChunkRecord.plan_id == plan_id, InfluenceChunkRecord.idx == index, _claimable(lease_timeout)
    )
    return session.execute(query).first() is not None


def _held(claim: ChunkClaim) -> Any:
    return and_(
        InfluenceChunkRecord.plan_id == claim.plan_id,
        InfluenceChunkRecord.idx == claim.index,
        InfluenceChunkRecord.status == "running",
        InfluenceChunkRecord.claims == claim.token,
    )


def touch(session: Session, claim: ChunkClaim) -> bool:
    """Refresh the claim's heartbeat; ``False`` when it is no longer ours (reclaimed, done or deleted)."""
    return bool(rowcount(session, update(InfluenceChunkRecord).where(_held(claim)).values(heartbeat_at=now())))


def release(session: Session, claim: ChunkClaim) -> None:
    """Give a claimed chunk back (its computation failed here); another worker may take it at once."""
    session.execute(
        update(InfluenceChunkRecord).where(_held(claim)).values(status="pending", worker=None, heartbeat_at=None)
    )


def store(session: Session, claim: ChunkClaim, result: bytes, seconds: float) -> bool:
    """Store a computed chunk, once: ``False`` (nothing written) when it is already ``done`` or deleted.

    Not fenced on the claim: a worker presumed dead that finishes anyway computed the same numbers, and
    the first result stored is the one kept.
    """
    t = now()
    hit = rowcount(
        session,
        update(InfluenceChunkRecord)
        .where(
            InfluenceChunkRecord.plan_id == claim.plan_id,
            InfluenceChunkRecord.idx == claim.index,
            InfluenceChunkRecord.status != "done",
        )
        .values(
            status="done",
            result=result,
            worker=claim.worker,
            device=claim.device,
            seconds=seconds,
            heartbeat_at=t,
            finished_at=t,
        ),
    )
    return bool(hit)


def counts(session: Session, plan_id: uuid.UUID) -> tuple[int, int]:
    """``(done, total)`` chunks of the plan."""
    row = session.execute(
        select(func.count(), func.count().filter(InfluenceChunkRecord.status == "done")).where(
            InfluenceChunkRecord.plan_id == plan_id
        )
    ).one()
    return int(row[1]), int(row[0])


def done_chunks(session: Session, plan_id: uuid.UUID) -> list[DoneChunk]:
    """Every ``done`` chunk of the plan with its result, in index order."""
    rows = session.execute(
        select(
            InfluenceChunkRecord.idx,
            InfluenceChunkRecord.start,
            InfluenceChunkRecord.stop,
            InfluenceChunkRecord.result,
            InfluenceChunkRecord.worker,
            InfluenceChunkRecord.device,
            InfluenceChunkRecord.seconds,
            InfluenceChunkRecord.claims,
        )
        .where(InfluenceChunkRecord.plan_id == plan_id, InfluenceChunkRecord.status == "done")
        .order_by(InfluenceChunkRecord.idx)
    ).all()
    return [DoneChunk(r.idx, r.start, r.stop, bytes(r.result), r.worker, r.device, r.seconds, r.claims) for r in rows]


def delete_plan(session: Session, plan_id: uuid.UUID) -> None:
    session.execute(delete(InfluencePlanRecord).where(InfluencePlanRecord.id == plan_id))
