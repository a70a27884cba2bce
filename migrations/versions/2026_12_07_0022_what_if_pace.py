"""A running what-if verification records its pace (``what_ifs.pace``), from which ``GET
/v1/audits/{id}/what-ifs/{job_id}`` says its time left, as an audit's does. Jobs from before have none (null).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07 11:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


# Plain ALTER TABLE, no batch: SQLite (3.35+) adds and drops a column in place, where a batch copies the whole table.


def upgrade() -> None:
    op.add_column("what_ifs", sa.Column("pace", JSON, nullable=True))


def downgrade() -> None:
    op.drop_column("what_ifs", "pace")
