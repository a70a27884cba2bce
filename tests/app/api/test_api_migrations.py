"""The Alembic migration: it builds the models' schema on an empty database and downgrades cleanly."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

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
