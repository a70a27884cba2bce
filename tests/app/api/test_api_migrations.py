"""The Alembic migration: it builds the models' schema on an empty database and downgrades cleanly; what the
migrations do with the rows they find (0008's roles, 0013's rows without a value, 0014's warnings)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.dialects import postgresql
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


@pytest.mark.parametrize("dialect", ["postgresql", "sqlite"])
def test_audits_take_their_results_warnings(dialect: str, make_database: Callable[[], str], tmp_path: Path) -> None:
    """Migration 0014: an audit that succeeded before has its results' warnings on its row; one without results, or
    whose results have none listed, has none known (null, not an empty list); the downgrade drops the column."""
    url = make_database() if dialect == "postgresql" else f"sqlite:///{tmp_path}/bind.db"
    upgrade(url, "0013")
    json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    audits = sa.table(
        "audits",
        *(sa.column(name, kind) for name, kind in (
            ("id", sa.Uuid()), ("tenant_id", sa.Uuid()), ("dataset", sa.String()), ("config", json),
            ("request_hash", sa.String()), ("state", sa.String()), ("progress", sa.Double()),
            ("attempts", sa.Integer()), ("results", json), ("created_at", sa.DateTime(timezone=True)),
            ("updated_at", sa.DateTime(timezone=True)),
        )),
    )  # fmt: skip
    tenant = uuid.uuid4()
    said = ["group b has only 6 positive test nodes", "a low self-check"]
    results = {"warned": {"metrics": {}, "warnings": said}, "quiet": {"metrics": {}}, "queued": None}
    ids = {name: uuid.uuid4() for name in results}
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO tenants (id, name, created_at) VALUES (:t, 'old', :at)"),
                         {"t": tenant if dialect == "postgresql" else tenant.hex, "at": datetime.now(UTC)})  # fmt: skip
            conn.execute(audits.insert(), [
                {"id": ids[name], "tenant_id": tenant, "dataset": "synthetic", "config": {}, "request_hash": "0" * 64,
                 "state": "succeeded" if doc else "queued", "progress": 0.0, "attempts": 0, "results": doc,
                 "created_at": datetime.now(UTC), "updated_at": datetime.now(UTC)}
                for name, doc in results.items()
            ])  # fmt: skip
        upgrade(url)
        with Session(engine) as session:
            found = {name: session.get(Audit, audit_id) for name, audit_id in ids.items()}
            assert {name: audit.warnings for name, audit in found.items() if audit is not None} == {
                "warned": said, "quiet": None, "queued": None}  # fmt: skip
        engine.dispose()
        downgrade(url, "0013")
        engine.dispose()
        assert "warnings" not in {c["name"] for c in inspect(engine).get_columns("audits")}
    finally:
        engine.dispose()


def test_sqlite_migrations_that_copy_the_audits_table_keep_its_rows(tmp_path: Path) -> None:
    """SQLite alters a table by copying it and dropping the old one (Alembic's batch mode: 0002's and 0004's audits);
    with foreign keys enforced, the drop would cascade to every influence row. The migrations run without them."""
    url = f"sqlite:///{tmp_path}/bind.db"
    upgrade(url)
    _, valued = _store_audits(url)
    kept = [r for r in _rows(url) if r[0] == valued]
    downgrade(url, "0013")
    downgrade(url, "0012", x=["undefined_rows=delete"])  # 0013's own rule: it takes the rows without a value
    downgrade(url, "0001")  # down past 0004 and 0002, which copy the audits table
    assert _rows(url) == kept
    upgrade(url)
    assert _rows(url) == kept
