"""`app.influence.chunk_rows` on a real Postgres database: concurrent claims, reclaiming stale ones, storing a
result once, and a plan belonging to its running attempt."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

from chunkhelp import LEASE, chunk_rows, claim, store_plan
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.session import now
from app.core.db.tables import Audit, InfluenceChunkRecord, InfluencePlanRecord
from app.influence import chunk_rows as stored
from bind_core.influence.distributed.plan import InfluencePlan
from bind_core.training.fit import TrainedModel


def test_concurrent_claims_skip_each_others_locked_rows(
    pg: sessionmaker[Session], running_audit: Callable[..., uuid.UUID], the_plan: InfluencePlan, model: TrainedModel
) -> None:
    plan_id = store_plan(pg, running_audit(), the_plan, model, n=3)
    with pg.begin() as first:  # holds its row locked until it commits
        a = stored.claim_chunk(first, plan_id, worker="a", device="cpu", lease_timeout=LEASE)
        b = claim(pg, plan_id, "b")  # another transaction, meanwhile: skips the locked row, does not wait
        c = claim(pg, plan_id, "c", newest_first=True)
    assert a is not None and b is not None and c is not None
    assert (a.index, b.index, c.index) == (0, 1, 2)
    assert claim(pg, plan_id, "d") is None  # all three running with fresh heartbeats
    assert [(r.status, r.worker, r.claims) for r in chunk_rows(pg, plan_id)] == [
        ("running", "a", 1), ("running", "b", 1), ("running", "c", 1),
    ]  # fmt: skip


def test_a_stale_claim_is_reclaimed_and_the_old_holder_fenced(
    pg: sessionmaker[Session], running_audit: Callable[..., uuid.UUID], the_plan: InfluencePlan, model: TrainedModel
) -> None:
    plan_id = store_plan(pg, running_audit(), the_plan, model, n=2)
    dead = claim(pg, plan_id, "dead", index=0)
    assert dead is not None and dead.token == 1
    assert claim(pg, plan_id, "other", index=0) is None  # fresh heartbeat: held by a live worker
    with pg.begin() as session:
        assert stored.touch(session, dead)
        session.execute(
            update(InfluenceChunkRecord)
            .where(InfluenceChunkRecord.plan_id == plan_id, InfluenceChunkRecord.idx == 0)
            .values(heartbeat_at=now() - timedelta(seconds=LEASE + 1))
        )
    taken = claim(pg, plan_id, "other", index=0)
    assert taken is not None and taken.token == 2 and taken.worker == "other"
    with pg.begin() as session:
        assert not stored.touch(session, dead)  # the dead worker's heartbeat no longer counts
        stored.release(session, dead)  # nor does its release
        assert stored.touch(session, taken)
    assert chunk_rows(pg, plan_id)[0].status == "running"
    with pg.begin() as session:
        stored.release(session, taken)
    row = chunk_rows(pg, plan_id)[0]
    assert (row.status, row.worker) == ("pending", None)


def test_a_result_is_stored_once(
    pg: sessionmaker[Session], running_audit: Callable[..., uuid.UUID], the_plan: InfluencePlan, model: TrainedModel
) -> None:
    plan_id = store_plan(pg, running_audit(), the_plan, model, n=2)
    first = claim(pg, plan_id, "first", index=1)
    assert first is not None
    with pg.begin() as session:
        session.execute(update(InfluenceChunkRecord).values(heartbeat_at=now() - timedelta(seconds=LEASE + 1)))
    second = claim(pg, plan_id, "second", index=1)
    assert second is not None
    with pg.begin() as session:
        assert stored.store(session, second, b"from second", 0.5)
    with pg.begin() as session:
        assert not stored.store(session, first, b"from first", 0.7)  # the slow one finishes: nothing written
    assert claim(pg, plan_id, "third", index=1) is None  # done chunks are never claimed again
    with pg() as session:
        done = stored.done_chunks(session, plan_id)
        assert stored.counts(session, plan_id) == (1, 2)
    assert [(d.index, d.result, d.worker, d.claims) for d in done] == [(1, b"from second", "second", 2)]


def test_a_plan_belongs_to_its_running_attempt(
    pg: sessionmaker[Session], running_audit: Callable[..., uuid.UUID], the_plan: InfluencePlan, model: TrainedModel
) -> None:
    audit_id = running_audit()
    old = store_plan(pg, audit_id, the_plan, model)
    finished = store_plan(pg, running_audit(), the_plan, model)
    with pg() as session:
        assert stored.plan_source(session, old) is not None
    with pg.begin() as session:
        session.execute(update(Audit).where(Audit.id == audit_id).values(attempts=2))
    with pg() as session:
        assert stored.plan_source(session, old) is None  # a newer attempt owns the audit
    with pg.begin() as session:
        session.execute(update(Audit).where(Audit.id == audit_id).values(attempts=1))
        gone = session.scalar(select(InfluencePlanRecord.audit_id).where(InfluencePlanRecord.id == finished))
        session.execute(update(Audit).where(Audit.id == gone).values(state="succeeded"))
    new = store_plan(pg, audit_id, the_plan, model)  # replaces the audit's old plan, drops the finished audit's
    with pg() as session:
        left = set(session.scalars(select(InfluencePlanRecord.id)))
        assert new in left and old not in left and finished not in left
        assert session.scalar(select(func.count()).where(InfluenceChunkRecord.plan_id == old)) == 0
