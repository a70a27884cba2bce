"""Governance: a role on every API key (the existing keys become ``admin``) and the append-only audit trail,
``trail_events``, whose rows a trigger keeps from being changed or deleted.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28 07:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_REFUSAL = "trail_events is append-only: its entries cannot be changed or deleted"

_POSTGRES_UP = (
    f"""
    CREATE FUNCTION trail_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION '{_REFUSAL}' USING ERRCODE = 'insufficient_privilege';
    END
    $$
    """,
    """
    CREATE TRIGGER trail_events_append_only BEFORE UPDATE OR DELETE ON trail_events
    FOR EACH ROW EXECUTE FUNCTION trail_events_append_only()
    """,
    # TRUNCATE skips row triggers: refuse it with a statement trigger.
    """
    CREATE TRIGGER trail_events_no_truncate BEFORE TRUNCATE ON trail_events
    FOR EACH STATEMENT EXECUTE FUNCTION trail_events_append_only()
    """,
)
_POSTGRES_DOWN = (
    "DROP TRIGGER IF EXISTS trail_events_no_truncate ON trail_events",
    "DROP TRIGGER IF EXISTS trail_events_append_only ON trail_events",
    "DROP FUNCTION IF EXISTS trail_events_append_only()",
)
_SQLITE_UP = tuple(
    f"CREATE TRIGGER trail_events_no_{verb.lower()} BEFORE {verb} ON trail_events "
    f"BEGIN SELECT RAISE(ABORT, '{_REFUSAL}'); END"
    for verb in ("UPDATE", "DELETE")
)
_SQLITE_DOWN = ("DROP TRIGGER IF EXISTS trail_events_no_update", "DROP TRIGGER IF EXISTS trail_events_no_delete")


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("role", sa.String(length=16), nullable=False, server_default="admin"))
    with op.batch_alter_table("api_keys") as batch:
        batch.alter_column("role", server_default=None)
        batch.create_check_constraint(op.f("ck_api_keys_role"), "role IN ('viewer', 'auditor', 'admin')")
    op.create_table(
        "trail_events",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("actor", sa.String(length=16), nullable=False),
        sa.Column("actor_key_id", sa.Uuid(), nullable=True),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target", sa.String(length=300), nullable=True),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("actor IN ('key', 'cli', 'system')", name=op.f("ck_trail_events_actor")),
        sa.CheckConstraint("outcome IN ('succeeded', 'denied', 'failed')", name=op.f("ck_trail_events_outcome")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trail_events")),
    )
    op.create_index(op.f("ix_trail_events_tenant_id_created_at"), "trail_events", ["tenant_id", "created_at"])
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in _POSTGRES_UP if postgres else _SQLITE_UP:
        op.execute(statement)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in _POSTGRES_DOWN if postgres else _SQLITE_DOWN:
        op.execute(statement)
    op.drop_index(op.f("ix_trail_events_tenant_id_created_at"), table_name="trail_events")
    op.drop_table("trail_events")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_constraint(op.f("ck_api_keys_role"), type_="check")
        batch.drop_column("role")
