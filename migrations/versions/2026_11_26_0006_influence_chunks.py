"""Distributed influence: ``influence_plans`` (the shared half of an estimate) and ``influence_chunks``.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26 01:15:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "influence_plans",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("audit_id", sa.Uuid(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("plan", sa.LargeBinary(), nullable=False),
        sa.Column("model_weights", sa.LargeBinary(), nullable=False),
        sa.Column("model_config", JSON, nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["audit_id"], ["audits.id"], name=op.f("fk_influence_plans_audit_id_audits"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_influence_plans")),
        sa.UniqueConstraint("audit_id", "attempt", name=op.f("uq_influence_plans_audit_id_attempt")),
    )
    op.create_table(
        "influence_chunks",
        sa.Column("plan_id", sa.Uuid(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("stop", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("claims", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("device", sa.String(length=64), nullable=True),
        sa.Column("heartbeat_at", TS, nullable=True),
        sa.Column("seconds", sa.Double(), nullable=True),
        sa.Column("result", sa.LargeBinary(), nullable=True),
        sa.Column("finished_at", TS, nullable=True),
        sa.CheckConstraint("status IN ('pending', 'running', 'done')", name=op.f("ck_influence_chunks_status")),
        sa.ForeignKeyConstraint(
            ["plan_id"],
            ["influence_plans.id"],
            name=op.f("fk_influence_chunks_plan_id_influence_plans"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("plan_id", "idx", name=op.f("pk_influence_chunks")),
    )


def downgrade() -> None:
    op.drop_table("influence_chunks")
    op.drop_table("influence_plans")
