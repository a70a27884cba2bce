"""A supplied model keeps what its registration found reading it on its graph (``supplied_models.registration``):
the warnings and their codes, the fit to its training nodes and the order of its outputs, or why it was not read.
``GET /v1/models/{id}`` says them as the registration's answer did. Models from before have none (null): their
reading says it was not kept.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07 10:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


# Plain ALTER TABLE, no batch: SQLite (3.35+) adds and drops a column in place, where a batch copies the whole table.


def upgrade() -> None:
    op.add_column("supplied_models", sa.Column("registration", JSON, nullable=True))


def downgrade() -> None:
    op.drop_column("supplied_models", "registration")
