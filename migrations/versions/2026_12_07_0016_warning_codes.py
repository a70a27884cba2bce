"""Each of an audit's warnings has a stable code (``audits.warning_codes``, in the order of ``warnings``): what a
machine acts on, where the sentences may be reworded. Written while the audit runs with its early warnings, and
replaced by the results' ``warning_codes`` when it succeeds. Audits from before have none (null): their results carry
no codes either.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07 03:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A frozen copy of the model's column type (a migration must not change when app code does).
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


# Plain ALTER TABLE, no batch: SQLite (3.35+) adds and drops a column in place, where a batch copies the whole table.


def upgrade() -> None:
    op.add_column("audits", sa.Column("warning_codes", JSON, nullable=True))


def downgrade() -> None:
    op.drop_column("audits", "warning_codes")
