"""Graph versions: uploading a graph under an existing name adds the next version and keeps the old ones.

Versions are numbered per ``(tenant, name)`` from 1; a unique constraint on ``(tenant_id, name, version)``
makes two concurrent uploads of one name take different numbers (the loser retries with the next one).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.db.tables import Graph, Tenant
from app.core.errors import ValidationProblem

_RETRIES = 5


def add_version(session: Session, tenant: Tenant, name: str, *, summary: dict[str, Any], data: bytes) -> Graph:
    """Insert ``data`` as the next version of the graph ``name`` and flush."""
    for attempt in range(_RETRIES):
        latest = session.scalar(select(func.max(Graph.version)).where(Graph.tenant_id == tenant.id, Graph.name == name))
        graph = Graph(
            tenant_id=tenant.id, name=name, version=(latest or 0) + 1, summary=summary, data=data, size_bytes=len(data)
        )
        try:
            with session.begin_nested():
                session.add(graph)
                session.flush()
        except IntegrityError:
            if attempt == _RETRIES - 1:
                raise
            continue
        return graph
    raise AssertionError("unreachable")


def latest_version(session: Session, tenant_id: Any, name: str, *, lock: bool = False) -> Graph | None:
    """The newest version of the tenant's graph ``name`` (``lock``: a share lock against its deletion)."""
    stmt = select(Graph).where(Graph.tenant_id == tenant_id, Graph.name == name).order_by(Graph.version.desc()).limit(1)
    return session.scalar(stmt.with_for_update(read=True) if lock else stmt)


def resolve_name(session: Session, tenant: Tenant, name: str) -> Graph:
    """The latest version of ``name``, or a 422 naming ``graph_name``."""
    graph = latest_version(session, tenant.id, name, lock=True)
    if graph is None:
        raise ValidationProblem(
            f"No graph named {name!r}.", errors=[{"field": "graph_name", "message": "no graph of that name"}]
        )
    return graph
