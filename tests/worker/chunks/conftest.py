"""Fixtures of the chunk tests: a new, migrated Postgres database per module (created from ``BIND_TEST_ADMIN_URL``,
default the local Postgres, and dropped at its end), a small graph stored as an upload, its model and influence plan,
and running audits of it."""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from chunkhelp import LEASE
from pgtemp import migrated_database
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.session import make_engine, now, session_factory
from app.core.db.tables import Audit, Tenant
from app.core.db.tables import Graph as GraphRow
from app.core.settings import Settings
from bind_core import Graph
from bind_core.data.datasets import save_npz, synthetic
from bind_core.influence.distributed.plan import InfluencePlan
from bind_core.influence.estimate import plan
from bind_core.training.fit import TrainConfig, TrainedModel, train


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    """A new, migrated Postgres database, dropped at the end of the module."""
    with migrated_database("bind_chunks") as url:
        yield url


@pytest.fixture(scope="module")
def pg(pg_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(pg_url)
    yield session_factory(engine)
    engine.dispose()


@pytest.fixture
def pg_settings(pg_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=pg_url, broker_url=f"sqla+sqlite:///{tmp_path / 'broker.db'}", progress_interval=0.0,
        heartbeat_interval=0.05, heartbeat_timeout=LEASE, influence_chunks=4, influence_chunk_min_train=1,
    )  # fmt: skip


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(200, seed=3, train_per_class=40)


@pytest.fixture(scope="module")
def model(graph: Graph) -> TrainedModel:
    return train(graph, TrainConfig(epochs=40, seed=0, polish_max_iter=200))


@pytest.fixture(scope="module")
def the_plan(model: TrainedModel, graph: Graph) -> InfluencePlan:
    return plan(model, graph)


@pytest.fixture(scope="module")
def graph_row(pg: sessionmaker[Session], graph: Graph) -> tuple[uuid.UUID, uuid.UUID]:
    """A tenant and the graph stored as an upload: ``(tenant_id, graph_id)``."""
    buffer = io.BytesIO()
    save_npz(graph, buffer)
    with pg.begin() as session:
        tenant = Tenant(name=f"t-{uuid.uuid4().hex[:6]}")
        session.add(tenant)
        session.flush()
        row = GraphRow(tenant_id=tenant.id, name="g", summary={}, data=buffer.getvalue(), size_bytes=1)
        session.add(row)
        session.flush()
        return tenant.id, row.id


@pytest.fixture
def running_audit(pg: sessionmaker[Session], graph_row: tuple[uuid.UUID, uuid.UUID]) -> Callable[..., uuid.UUID]:
    """Insert an audit of the stored graph (``running``, attempt 1 unless told) and return its id."""

    def make(**values: Any) -> uuid.UUID:
        fields: dict[str, Any] = {"state": "running", "attempts": 1, "heartbeat_at": now(), "config": {}}
        fields.update(values)
        with pg.begin() as session:
            audit = Audit(tenant_id=graph_row[0], graph_id=graph_row[1], request_hash="h" * 64, **fields)
            session.add(audit)
            session.flush()
            return audit.id

    return make
