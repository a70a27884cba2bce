"""An audit's warnings, on its row: written while it runs, once its model and metrics are in (a supplied model fed
inputs it never saw is told before the estimate's hour), and replaced by the results' full list when it succeeds.
Audits that succeeded before take their results' ``warnings``; the others have none known (null).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06 23:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A frozen copy of the model's column type (a migration must not change when app code does).
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

BACKFILL = {
    "postgresql": "UPDATE audits SET warnings = results->'warnings' "
    "WHERE results IS NOT NULL AND jsonb_typeof(results->'warnings') = 'array'",
    "sqlite": "UPDATE audits SET warnings = json_extract(results, '$.warnings') "
    "WHERE results IS NOT NULL AND json_type(results, '$.warnings') = 'array'",
}


# Plain ALTER TABLE, no batch: SQLite (3.35+) adds and drops a column in place, where a batch copies the whole table.


def upgrade() -> None:
    op.add_column("audits", sa.Column("warnings", JSON, nullable=True))
    backfill = BACKFILL.get(op.get_context().dialect.name)
    if backfill is not None:
        op.execute(backfill)


def downgrade() -> None:
    op.drop_column("audits", "warnings")
