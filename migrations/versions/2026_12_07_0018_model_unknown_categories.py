"""A supplied model's registration says what a later version's category its encoder never saw becomes
(``supplied_models.unknown_categories``): ``refuse`` (the audit fails naming it) or ``ignore`` (its nodes read as none
of the model's categories of that column). Models from before refuse, as they did.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07 06:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE, no batch: SQLite (3.35+) adds and drops a column in place, where a batch copies the whole table.


def upgrade() -> None:
    op.add_column(
        "supplied_models",
        sa.Column("unknown_categories", sa.String(16), nullable=False, server_default="refuse"),
    )


def downgrade() -> None:
    op.drop_column("supplied_models", "unknown_categories")
