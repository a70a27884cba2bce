"""Supplied models: a GNN trained elsewhere, registered for a graph; audits may name one.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25 23:55:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "supplied_models",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("graph_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("config", JSON, nullable=False),
        sa.Column("weights", sa.LargeBinary(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_supplied_models_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["graph_id"], ["graphs.id"], name=op.f("fk_supplied_models_graph_id_graphs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_supplied_models")),
    )
    op.create_index(op.f("ix_supplied_models_graph_id"), "supplied_models", ["graph_id"])
    op.create_index(op.f("ix_supplied_models_tenant_id_created_at"), "supplied_models", ["tenant_id", "created_at"])
    with op.batch_alter_table("audits") as batch:
        batch.add_column(sa.Column("model_id", sa.Uuid(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_audits_model_id_supplied_models"), "supplied_models", ["model_id"], ["id"], ondelete="SET NULL"
        )
        batch.create_index(op.f("ix_audits_model_id"), ["model_id"])


def downgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.drop_index(op.f("ix_audits_model_id"))
        batch.drop_constraint(op.f("fk_audits_model_id_supplied_models"), type_="foreignkey")
        batch.drop_column("model_id")
    op.drop_table("supplied_models")
