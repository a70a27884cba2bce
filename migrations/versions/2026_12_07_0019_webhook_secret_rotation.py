"""A webhook's signing secret can be rotated with an overlap: the secret it replaces (``webhooks.previous_secret``)
keeps signing every delivery beside the new one until ``previous_secret_expires_at``, so a receiver moves to the new
secret without refusing a delivery. Subscriptions from before have none (null).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07 06:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Plain ALTER TABLE, no batch: SQLite (3.35+) adds and drops a column in place, where a batch copies the whole table.


def upgrade() -> None:
    op.add_column("webhooks", sa.Column("previous_secret", sa.String(100), nullable=True))
    op.add_column("webhooks", sa.Column("previous_secret_expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("webhooks", "previous_secret_expires_at")
    op.drop_column("webhooks", "previous_secret")
