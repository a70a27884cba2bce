"""What the chunk tests share besides their fixtures (``conftest.py``): the lease, storing a plan, claiming a chunk
and reading the chunk rows back."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker, undefer

from app.core.db.tables import InfluenceChunkRecord
from app.influence import chunk_rows as stored
from app.influence.chunk_rows import ChunkClaim
from bind_core.influence.distributed.plan import InfluencePlan
from bind_core.training.fit import TrainedModel

LEASE = 2.0  # seconds without a heartbeat after which a running chunk may be claimed again


def store_plan(
    pg: sessionmaker[Session], audit_id: uuid.UUID, the_plan: InfluencePlan, model: TrainedModel, n: int = 4
) -> uuid.UUID:
    from bind_core.influence.distributed.plan import chunk_bounds

    with pg.begin() as session:
        return stored.create_plan(
            session, audit_id=audit_id, attempt=1, plan=the_plan.to_bytes(), weights=model.to_bytes(),
            model_config=model.config_dict(), bounds=chunk_bounds(the_plan.num_train, n),
        )  # fmt: skip


def claim(pg: sessionmaker[Session], plan_id: uuid.UUID, worker: str, **kwargs: Any) -> ChunkClaim | None:
    with pg.begin() as session:
        return stored.claim_chunk(session, plan_id, worker=worker, device="cpu", lease_timeout=LEASE, **kwargs)


def chunk_rows(pg: sessionmaker[Session], plan_id: uuid.UUID) -> list[InfluenceChunkRecord]:
    query = select(InfluenceChunkRecord).where(InfluenceChunkRecord.plan_id == plan_id).order_by("idx")
    with pg() as session:
        return list(session.scalars(query.options(undefer(InfluenceChunkRecord.result))))
