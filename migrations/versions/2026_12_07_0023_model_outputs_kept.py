"""A supplied model's own outputs on its graph are kept (``supplied_models.outputs``, ``outputs_name``) where its
registration could not compare them (a graph above the nodes a registration reads): its first audit on that graph
compares them. Models from before have none (null).

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07 14:05:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE, no batch: SQLite (3.35+) adds and drops a column in place, where a batch copies the whole table.


def upgrade() -> None:
    op.add_column("supplied_models", sa.Column("outputs", sa.LargeBinary(), nullable=True))
    op.add_column("supplied_models", sa.Column("outputs_name", sa.String(200), nullable=True))


def downgrade() -> None:
    op.drop_column("supplied_models", "outputs_name")
    op.drop_column("supplied_models", "outputs")
