"""Initial schema: tenants, API keys, graphs, audits and influence rows.

Revision ID: 0001
Revises:
Create Date: 2026-11-25 22:26:31
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the model's column types (a migration must not change when app code does).
TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
        sa.UniqueConstraint("name", name=op.f("uq_tenants_name")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("revoked_at", TS, nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_api_keys_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
    )
    op.create_index(op.f("ix_api_keys_prefix"), "api_keys", ["prefix"])
    op.create_index(op.f("ix_api_keys_tenant_id"), "api_keys", ["tenant_id"])

    op.create_table(
        "graphs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("summary", JSON, nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_graphs_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_graphs")),
    )
    op.create_index(op.f("ix_graphs_tenant_id_created_at"), "graphs", ["tenant_id", "created_at"])

    op.create_table(
        "audits",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("graph_id", sa.Uuid(), nullable=True),
        sa.Column("dataset", sa.String(length=100), nullable=True),
        sa.Column("config", JSON, nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("stage", sa.String(length=32), nullable=True),
        sa.Column("progress", sa.Double(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("device", sa.String(length=64), nullable=True),
        sa.Column("error", JSON, nullable=True),
        sa.Column("results", JSON, nullable=True),
        sa.Column("model_weights", sa.LargeBinary(), nullable=True),
        sa.Column("model_config", JSON, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("started_at", TS, nullable=True),
        sa.Column("finished_at", TS, nullable=True),
        sa.Column("heartbeat_at", TS, nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.CheckConstraint(
            "state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')", name=op.f("ck_audits_state")
        ),
        sa.CheckConstraint("(graph_id IS NULL) OR (dataset IS NULL)", name=op.f("ck_audits_one_source")),
        sa.ForeignKeyConstraint(
            ["graph_id"], ["graphs.id"], name=op.f("fk_audits_graph_id_graphs"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_audits_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audits")),
        sa.UniqueConstraint("tenant_id", "idempotency_key", name=op.f("uq_audits_tenant_id_idempotency_key")),
    )
    op.create_index(op.f("ix_audits_graph_id"), "audits", ["graph_id"])
    op.create_index(op.f("ix_audits_state_heartbeat_at"), "audits", ["state", "heartbeat_at"])
    op.create_index(op.f("ix_audits_tenant_id_created_at"), "audits", ["tenant_id", "created_at"])

    op.create_table(
        "influence_rows",
        sa.Column("audit_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("node_index", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.BigInteger(), nullable=False),
        sa.Column("grp", sa.Integer(), nullable=False),
        sa.Column("label", sa.Integer(), nullable=False),
        sa.Column("delta", sa.Double(), nullable=False),
        sa.Column("delta_sp", sa.Double(), nullable=False),
        sa.Column("delta_eo", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["audit_id"], ["audits.id"], name=op.f("fk_influence_rows_audit_id_audits"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("audit_id", "position", name=op.f("pk_influence_rows")),
    )
    op.create_index(
        op.f("ix_influence_rows_audit_id_delta_position"), "influence_rows", ["audit_id", "delta", "position"]
    )
    op.create_index(op.f("ix_influence_rows_audit_id_node_index"), "influence_rows", ["audit_id", "node_index"])


def downgrade() -> None:
    op.drop_table("influence_rows")
    op.drop_table("audits")
    op.drop_table("graphs")
    op.drop_table("api_keys")
    op.drop_table("tenants")
