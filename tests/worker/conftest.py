"""Worker tests on a migrated SQLite file: the runner and the sweeper with `run_audit` replaced by fakes."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.migrate import upgrade
from app.core.db.session import make_engine, session_factory
from app.core.db.tables import Audit, Tenant
from app.core.settings import Settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        database_url=f"sqlite:///{tmp_path / 'bind.db'}",
        broker_url=f"sqla+sqlite:///{tmp_path / 'broker.db'}",
        data_root=tmp_path / "data",
        progress_interval=0.0,
        heartbeat_interval=0.05,
        heartbeat_timeout=30.0,
        queued_timeout=60.0,
    )


@pytest.fixture
def sessions(settings: Settings) -> Iterator[sessionmaker[Session]]:
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    yield session_factory(engine)
    engine.dispose()


@pytest.fixture
def tenant_id(sessions: sessionmaker[Session]) -> uuid.UUID:
    with sessions.begin() as session:
        tenant = Tenant(name="acme")
        session.add(tenant)
        session.flush()
        return tenant.id


@pytest.fixture
def new_audit(sessions: sessionmaker[Session], tenant_id: uuid.UUID) -> Callable[..., uuid.UUID]:
    """Insert a queued audit on the dataset ``toy`` and return its id."""

    def make(**values: object) -> uuid.UUID:
        with sessions.begin() as session:
            audit = Audit(tenant_id=tenant_id, dataset="toy", config={"lam": 0.5}, request_hash="h" * 64)
            for name, value in values.items():
                setattr(audit, name, value)
            session.add(audit)
            session.flush()
            return audit.id

    return make
