"""A supplied model's own outputs on later versions of its graph (``version_outputs``): uploaded with ``PUT
/v1/models/{id}/outputs/{graph_id}``, compared with the model as an audit reads that version, so that a scheduled
audit of a deployed model confirms its inputs on each new snapshot as its registration did on the first.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07 16:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the model's column types (a migration must not change when app code does).
TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "version_outputs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("model_id", sa.Uuid(), nullable=False),
        sa.Column("graph_id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("outputs", sa.LargeBinary(), nullable=False),
        sa.Column("outputs_name", sa.String(length=200), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("match", JSON, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["supplied_models.id"],
            name=op.f("fk_version_outputs_model_id_supplied_models"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["graph_id"], ["graphs.id"], name=op.f("fk_version_outputs_graph_id_graphs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_version_outputs_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_version_outputs")),
        sa.UniqueConstraint("model_id", "graph_id", name=op.f("uq_version_outputs_model_id_graph_id")),
    )
    op.create_index(op.f("ix_version_outputs_model_id_created_at"), "version_outputs", ["model_id", "created_at"])
    op.create_index(op.f("ix_version_outputs_graph_id"), "version_outputs", ["graph_id"])
    op.create_index(op.f("ix_version_outputs_tenant_id"), "version_outputs", ["tenant_id"])


def downgrade() -> None:
    op.drop_table("version_outputs")
