"""Edge attribution: ``edge_influence_rows``, the estimated ΔΓ of deleting each undirected edge of an audit run with
``edges``.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26 18:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "edge_influence_rows",
        sa.Column("audit_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("u_index", sa.Integer(), nullable=False),
        sa.Column("v_index", sa.Integer(), nullable=False),
        sa.Column("u_id", sa.BigInteger(), nullable=False),
        sa.Column("v_id", sa.BigInteger(), nullable=False),
        sa.Column("u_grp", sa.Integer(), nullable=False),
        sa.Column("v_grp", sa.Integer(), nullable=False),
        sa.Column("within_group", sa.Boolean(), nullable=False),
        sa.Column("affects", sa.Boolean(), nullable=False),
        sa.Column("delta", sa.Double(), nullable=False),
        sa.Column("delta_sp", sa.Double(), nullable=False),
        sa.Column("delta_eo", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["audit_id"], ["audits.id"], name=op.f("fk_edge_influence_rows_audit_id_audits"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("audit_id", "position", name=op.f("pk_edge_influence_rows")),
    )
    op.create_index(
        op.f("ix_edge_influence_rows_audit_id_delta_position"),
        "edge_influence_rows",
        ["audit_id", "delta", "position"],
    )


def downgrade() -> None:
    op.drop_table("edge_influence_rows")
