"""Scheduled audits: ``schedules``, and ``audits.schedule_id`` / ``slot_time`` (unique: a slot runs once).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26 00:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("graph_name", sa.String(length=200), nullable=True),
        sa.Column("dataset", sa.String(length=100), nullable=True),
        sa.Column("settings", JSON, nullable=False),
        sa.Column("config", JSON, nullable=False),
        sa.Column("interval_seconds", sa.Integer(), nullable=True),
        sa.Column("cron", sa.String(length=100), nullable=True),
        sa.Column("thresholds", JSON, nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("next_run_at", TS, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.CheckConstraint("state IN ('active', 'paused')", name=op.f("ck_schedules_state")),
        sa.CheckConstraint("(graph_name IS NULL) <> (dataset IS NULL)", name=op.f("ck_schedules_one_source")),
        sa.CheckConstraint("(interval_seconds IS NULL) <> (cron IS NULL)", name=op.f("ck_schedules_one_timing")),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_schedules_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
    )
    op.create_index(op.f("ix_schedules_state_next_run_at"), "schedules", ["state", "next_run_at"])
    op.create_index(op.f("ix_schedules_tenant_id_created_at"), "schedules", ["tenant_id", "created_at"])
    with op.batch_alter_table("audits") as batch:
        batch.add_column(sa.Column("schedule_id", sa.Uuid(), nullable=True))
        batch.add_column(sa.Column("slot_time", TS, nullable=True))
        batch.create_foreign_key(
            op.f("fk_audits_schedule_id_schedules"), "schedules", ["schedule_id"], ["id"], ondelete="SET NULL"
        )
        batch.create_unique_constraint(op.f("uq_audits_schedule_id_slot_time"), ["schedule_id", "slot_time"])


def downgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.drop_constraint(op.f("uq_audits_schedule_id_slot_time"), type_="unique")
        batch.drop_constraint(op.f("fk_audits_schedule_id_schedules"), type_="foreignkey")
        batch.drop_column("slot_time")
        batch.drop_column("schedule_id")
    op.drop_table("schedules")
