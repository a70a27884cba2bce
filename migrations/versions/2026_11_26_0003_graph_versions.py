"""Graph versions: ``graphs.version`` (unique per tenant and name) and ``audits.graph_version``.

Existing graphs that share a name become its versions 1, 2, ... in upload order.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26 00:05:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("graphs") as batch:
        batch.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="1"))
    op.execute(
        "UPDATE graphs SET version = (SELECT COUNT(*) FROM graphs AS g WHERE g.tenant_id = graphs.tenant_id "
        "AND g.name = graphs.name AND (g.created_at < graphs.created_at "
        "OR (g.created_at = graphs.created_at AND g.id <= graphs.id)))"
    )
    with op.batch_alter_table("graphs") as batch:
        batch.alter_column("version", server_default=None)
        batch.create_unique_constraint(op.f("uq_graphs_tenant_id_name_version"), ["tenant_id", "name", "version"])
    with op.batch_alter_table("audits") as batch:
        batch.add_column(sa.Column("graph_version", sa.Integer(), nullable=True))
    op.execute("UPDATE audits SET graph_version = (SELECT version FROM graphs WHERE graphs.id = audits.graph_id)")


def downgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.drop_column("graph_version")
    with op.batch_alter_table("graphs") as batch:
        batch.drop_constraint(op.f("uq_graphs_tenant_id_name_version"), type_="unique")
        batch.drop_column("version")
