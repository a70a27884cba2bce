"""What-if verification jobs: delete a chosen set of an audit's training nodes, retrain over seeds, measure.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28 09:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the model's column types (a migration must not change when app code does).
TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "what_ifs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("audit_id", sa.Uuid(), nullable=False),
        sa.Column("chosen_by", JSON, nullable=False),
        sa.Column("positions", JSON, nullable=False),
        sa.Column("nodes", JSON, nullable=False),
        sa.Column("estimate", JSON, nullable=False),
        sa.Column("seeds", JSON, nullable=False),
        sa.Column("random_sets", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("progress", sa.Double(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("device", sa.String(length=64), nullable=True),
        sa.Column("result", JSON, nullable=True),
        sa.Column("error", JSON, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("started_at", TS, nullable=True),
        sa.Column("finished_at", TS, nullable=True),
        sa.Column("heartbeat_at", TS, nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.CheckConstraint(
            "state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')", name=op.f("ck_what_ifs_state")
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_what_ifs_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["audit_id"], ["audits.id"], name=op.f("fk_what_ifs_audit_id_audits"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_what_ifs")),
    )
    op.create_index(op.f("ix_what_ifs_tenant_id"), "what_ifs", ["tenant_id"])
    op.create_index(op.f("ix_what_ifs_audit_id_created_at"), "what_ifs", ["audit_id", "created_at"])
    op.create_index(op.f("ix_what_ifs_state_heartbeat_at"), "what_ifs", ["state", "heartbeat_at"])


def downgrade() -> None:
    op.drop_table("what_ifs")
