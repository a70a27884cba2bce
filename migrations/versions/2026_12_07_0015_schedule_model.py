"""A schedule may audit a supplied model (``schedules.model_id``): each slot audits that model on the latest version of
the graph it was registered for. No foreign key, as ``graph_name`` has none: a model deleted later fails that slot's
audit with ``model-not-found`` rather than turning the schedule into one that trains its own model.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07 02:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE, no batch: SQLite (3.35+) adds and drops a column in place, where a batch copies the whole table.


def upgrade() -> None:
    op.add_column("schedules", sa.Column("model_id", sa.Uuid(), nullable=True))


def downgrade() -> None:
    op.drop_column("schedules", "model_id")
