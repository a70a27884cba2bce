"""Model artifacts: the models an audit retrained (each debiasing budget's, later each verified what-if's), kept as
safetensors weights and a config in the form of the audited model, to download or register as a supplied model.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28 09:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "model_artifacts",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("audit_id", sa.Uuid(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("budget_index", sa.Integer(), nullable=True),
        sa.Column("what_if_id", sa.Uuid(), nullable=True),
        sa.Column("config", JSON, nullable=False),
        sa.Column("weights", sa.LargeBinary(), nullable=True),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.CheckConstraint("source IN ('debias', 'what_if')", name=op.f("ck_model_artifacts_source")),
        sa.CheckConstraint(
            "(source = 'debias' AND budget_index IS NOT NULL) OR (source = 'what_if' AND what_if_id IS NOT NULL)",
            name=op.f("ck_model_artifacts_source_key"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_model_artifacts_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["audit_id"], ["audits.id"], name=op.f("fk_model_artifacts_audit_id_audits"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_artifacts")),
        sa.UniqueConstraint(
            "audit_id", "source", "budget_index", name=op.f("uq_model_artifacts_audit_id_source_budget_index")
        ),
        sa.UniqueConstraint("audit_id", "what_if_id", name=op.f("uq_model_artifacts_audit_id_what_if_id")),
    )
    op.create_index(op.f("ix_model_artifacts_audit_id"), "model_artifacts", ["audit_id"])
    op.create_index(op.f("ix_model_artifacts_tenant_id_created_at"), "model_artifacts", ["tenant_id", "created_at"])


def downgrade() -> None:
    op.drop_table("model_artifacts")
