"""A running audit records its pace (``audits.pace``: its stage, when it began, the fraction done, the stages after
it and how long they took in an earlier audit of the same request), from which ``GET /v1/audits/{id}`` says its time
left. Audits from before have none (null).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07 11:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


# Plain ALTER TABLE, no batch: SQLite (3.35+) adds and drops a column in place, where a batch copies the whole table.


def upgrade() -> None:
    op.add_column("audits", sa.Column("pace", JSON, nullable=True))


def downgrade() -> None:
    op.drop_column("audits", "pace")
