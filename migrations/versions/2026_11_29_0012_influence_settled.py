"""Influence rows say whether the step estimate's steps settled for the node (null: the linear estimate).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("influence_rows", sa.Column("settled", sa.Boolean(), nullable=True))


def downgrade() -> None:
    op.drop_column("influence_rows", "settled")
