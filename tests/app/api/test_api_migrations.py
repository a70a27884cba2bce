"""The Alembic migration: it builds the models' schema on an empty database and downgrades cleanly."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from app.core.db.migrate import downgrade, upgrade
from app.core.db.tables import Base

TABLES = {
    "tenants", "api_keys", "graphs", "audits", "influence_rows", "supplied_models", "schedules", "webhooks",
    "webhook_deliveries", "influence_plans", "influence_chunks", "edge_influence_rows", "trail_events",
}  # fmt: skip


def test_upgrade_downgrade_upgrade(make_database: Callable[[], str]) -> None:
    url = make_database()
    engine = create_engine(url)
    try:
        upgrade(url)
        assert set(inspect(engine).get_table_names()) >= TABLES
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        downgrade(url, "0001")  # every later migration steps down on a migrated schema
        engine.dispose()
        dropped = {"supplied_models", "influence_plans", "influence_chunks", "edge_influence_rows"}
        assert not dropped & set(inspect(engine).get_table_names())
        upgrade(url)
        downgrade(url, "base")
        engine.dispose()
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        upgrade(url)
        assert set(inspect(engine).get_table_names()) >= TABLES
    finally:
        engine.dispose()


def test_sqlite_upgrade_downgrade(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/bind.db"
    upgrade(url)
    downgrade(url, "base")
    upgrade(url)
    engine = create_engine(url)
    assert set(inspect(engine).get_table_names()) >= TABLES
    engine.dispose()


def test_keys_made_before_roles_become_admin(make_database: Callable[[], str]) -> None:
    """Migration 0008: every key that existed keeps all it could do (admin); a new key must name its role."""
    url = make_database()
    upgrade(url, "0007")
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            tenant, key = uuid.uuid4(), uuid.uuid4()
            conn.execute(text("INSERT INTO tenants (id, name, created_at) VALUES (:t, 'old', now())"), {"t": tenant})
            conn.execute(
                text("INSERT INTO api_keys (id, tenant_id, prefix, key_hash, created_at) "
                     "VALUES (:k, :t, 'bind_abcdefgh', :h, now())"),
                {"k": key, "t": tenant, "h": "0" * 64},
            )  # fmt: skip
        upgrade(url)
        with engine.begin() as conn:
            assert conn.execute(text("SELECT role FROM api_keys")).scalars().all() == ["admin"]
        with pytest.raises(IntegrityError), engine.begin() as conn:  # no default role any more
            conn.execute(
                text("INSERT INTO api_keys (id, tenant_id, prefix, key_hash, created_at) "
                     "VALUES (:k, :t, 'bind_ijklmnop', :h, now())"),
                {"k": uuid.uuid4(), "t": tenant, "h": "1" * 64},
            )  # fmt: skip
    finally:
        engine.dispose()
