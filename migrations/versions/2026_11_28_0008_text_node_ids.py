"""Text node ids: the user's id of a node (and of an edge's endpoints) where the id column holds text.

``node_id`` (``u_id``, ``v_id``) keeps integer ids; where the user's ids are text, it holds the node's index and the
text id sits in ``node_key`` (``u_key``, ``v_key``), so an audit lists nodes by the ids the user wrote.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28 07:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("influence_rows", sa.Column("node_key", sa.Text(), nullable=True))
    op.add_column("edge_influence_rows", sa.Column("u_key", sa.Text(), nullable=True))
    op.add_column("edge_influence_rows", sa.Column("v_key", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("edge_influence_rows", "v_key")
    op.drop_column("edge_influence_rows", "u_key")
    op.drop_column("influence_rows", "node_key")
