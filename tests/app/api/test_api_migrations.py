"""The Alembic migration: it builds the models' schema on an empty database and downgrades cleanly; what the
migrations do with the rows they find (0008's roles, 0013's rows without a value)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.db.migrate import downgrade, upgrade
from app.core.db.tables import Audit, Base, InfluenceRow, Tenant

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


def _store_audits(url: str) -> tuple[uuid.UUID, uuid.UUID]:
    """At head: an audit with two rows, one without a value, and an audit whose rows all have one."""
    engine = create_engine(url)
    try:
        with Session(engine) as session, session.begin():
            tenant = Tenant(name=f"t-{uuid.uuid4().hex[:8]}")
            session.add(tenant)
            session.flush()
            audits = [Audit(tenant_id=tenant.id, dataset="synthetic", config={}, request_hash="0" * 64) for _ in "ab"]
            session.add_all(audits)
            session.flush()
            undefined, valued = audits[0].id, audits[1].id
            common = {"node_index": 0, "node_id": 7, "grp": 0, "label": 1}
            session.add_all([
                InfluenceRow(audit_id=undefined, position=0, **common, delta=-0.5, delta_sp=-0.4, delta_eo=-0.6),
                InfluenceRow(audit_id=undefined, position=1, **common, delta=None, delta_sp=None, delta_eo=None,
                             settled=False, no_minimum=True),
                InfluenceRow(audit_id=valued, position=0, **common, delta=0.25, delta_sp=0.5, delta_eo=0.0),
            ])  # fmt: skip
    finally:
        engine.dispose()
    return undefined, valued


def _rows(url: str) -> list[tuple[Any, ...]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            query = "SELECT audit_id, position, delta, delta_sp, delta_eo FROM influence_rows"
            rows = [(uuid.UUID(str(a)), *rest) for a, *rest in conn.execute(text(query))]  # SQLite's ids are text
            return sorted(rows, key=lambda r: (str(r[0]), r[1]))
    finally:
        engine.dispose()


def _columns(url: str) -> dict[str, bool]:
    """influence_rows' columns → nullable."""
    engine = create_engine(url)
    try:
        return {c["name"]: c["nullable"] for c in inspect(engine).get_columns("influence_rows")}
    finally:
        engine.dispose()


@pytest.mark.parametrize("dialect", ["postgresql", "sqlite"])
def test_rows_without_a_value_and_the_downgrade(dialect: str, make_database: Callable[[], str], tmp_path: Path) -> None:
    """Migration 0013: null deltas and no_minimum. Its downgrade refuses while rows without a value exist (0012 cannot
    store them), and with ``-x undefined_rows=delete`` deletes those audits' rows; it never writes a 0."""
    url = make_database() if dialect == "postgresql" else f"sqlite:///{tmp_path}/bind.db"
    upgrade(url)
    columns = _columns(url)
    assert columns["no_minimum"] and columns["delta"] and columns["delta_sp"] and columns["delta_eo"]
    undefined, valued = _store_audits(url)
    before = _rows(url)
    with pytest.raises(RuntimeError, match=f"1 audit.*{undefined}"):
        downgrade(url, "0012")
    assert _rows(url) == before and "no_minimum" in _columns(url)  # refused: nothing changed
    downgrade(url, "0012", x=["undefined_rows=delete"])
    columns = _columns(url)
    assert "no_minimum" not in columns and not (columns["delta"] or columns["delta_sp"] or columns["delta_eo"])
    assert len(before) == 3 and _rows(url) == [r for r in before if r[0] == valued]  # all the audit's rows went
    assert _rows(url) == [(valued, 0, 0.25, 0.5, 0.0)]  # the other audit's untouched
    upgrade(url)
    assert _columns(url)["no_minimum"] and _rows(url) == [(valued, 0, 0.25, 0.5, 0.0)]
