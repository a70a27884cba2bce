"""Influence rows may have no value: a node whose deletion has no minimum near the given weights (the step
estimate's) has null deltas and ``no_minimum`` true (null on every other row, and on rows stored before).

Downgrade: revision 0012's deltas are NOT NULL and it has no column to say why a value is missing, so a stored row
with a null delta cannot go down without inventing a number. By default the downgrade refuses while such rows exist
(it names their audits); ``alembic -x undefined_rows=delete downgrade 0012`` instead deletes every influence row of
those audits (all of an audit's rows, so that none is left with a partial listing: its influence then reads as not
computed, 409 ``influence-not-ready``; its results and edge rows stay). ``downgrade(url, "0012",
x=["undefined_rows=delete"])`` of ``app.core.db.migrate`` does the same. Offline (``--sql``) there are no rows to look
at: the script has the ``DELETE`` with the option, and without it the database refuses ``SET NOT NULL`` where a null
is left. It never writes 0 (or any number) in place of a null.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 12:00:00
"""

import uuid
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DELTAS = ("delta", "delta_sp", "delta_eo")
UNDEFINED = "delta IS NULL OR delta_sp IS NULL OR delta_eo IS NULL"
AUDITS = f"SELECT DISTINCT audit_id FROM influence_rows WHERE {UNDEFINED}"
DELETE = f"DELETE FROM influence_rows WHERE audit_id IN ({AUDITS})"
SHOWN = 10


def upgrade() -> None:
    with op.batch_alter_table("influence_rows") as batch:
        for name in DELTAS:
            batch.alter_column(name, existing_type=sa.Double(), nullable=True)
        batch.add_column(sa.Column("no_minimum", sa.Boolean(), nullable=True))


def downgrade() -> None:
    delete = context.get_x_argument(as_dictionary=True).get("undefined_rows") == "delete"
    if context.is_offline_mode():  # no rows to look at: with the option, the DELETE; without, SET NOT NULL refuses
        if delete:
            op.execute(DELETE)
    else:
        audits = sorted(str(uuid.UUID(str(a))) for a in op.get_bind().execute(sa.text(AUDITS)).scalars())  # SQLite: hex
        if audits and not delete:
            shown = ", ".join(audits[:SHOWN]) + (", ..." if len(audits) > SHOWN else "")
            raise RuntimeError(
                f"cannot downgrade below 0013: {len(audits)} audit(s) have influence rows without a value (their "
                f"deletion has no minimum near the weights), which revision 0012 cannot store: {shown}. Erase those "
                "audits, or run `alembic -x undefined_rows=delete downgrade 0012` to delete all their influence rows "
                "(nothing is ever stored as 0 in place of a missing value)."
            )
        if audits:
            op.execute(DELETE)
    with op.batch_alter_table("influence_rows") as batch:
        batch.drop_column("no_minimum")
        for name in DELTAS:
            batch.alter_column(name, existing_type=sa.Double(), nullable=False)
