"""A webhook subscription may name warning codes (``webhooks.warning_codes``): ``audit.warned`` is then sent only for
an audit that warns with one of them. Subscriptions from before have none (null): every warned audit, as before.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A frozen copy of the model's column type (a migration must not change when app code does).
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


# Plain ALTER TABLE, no batch: SQLite (3.35+) adds and drops a column in place, where a batch copies the whole table.


def upgrade() -> None:
    op.add_column("webhooks", sa.Column("warning_codes", JSON, nullable=True))


def downgrade() -> None:
    op.drop_column("webhooks", "warning_codes")
