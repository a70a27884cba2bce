"""Erasing audits and graphs with every row derived from them.

What an audit leaves: its row (results, per-node feature distributions and profiles in ``results``, the trained
weights), its node and edge influence rows, a distributed estimate's plan and chunks, the retrained models it kept
(``model_artifacts``; all ``ON DELETE CASCADE`` from the audit) and the webhook deliveries that carried its outcome
(their payload names it). A graph adds its stored file (``graphs.data``), the models registered for it, and every
audit of it: the schedule runs included.

An audit still queued or running is erased too: its worker's next write finds no row and the attempt ends as
cancelled (``app/audits/repository.py``). The trail keeps one entry per erasure, naming only the resource's path.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import ColumnElement, delete, select
from sqlalchemy.orm import Session

from app.core.db.tables import Audit, Graph, SuppliedModel, Tenant, Webhook, WebhookDelivery
from app.core.errors import NotFound


def erase_audits(session: Session, tenant_id: uuid.UUID, audit_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """Delete the audits and their deliveries (the rows cascading from them go with them); only flushes. Return the
    ids this call deleted (a concurrent erasure, another worker's retention sweep say, may have taken some)."""
    if not audit_ids:
        return []
    names = [str(a) for a in audit_ids]
    _delete_deliveries(session, tenant_id, WebhookDelivery.payload["data"]["audit_id"].as_string().in_(names))
    stmt = delete(Audit).where(Audit.id.in_(audit_ids), Audit.tenant_id == tenant_id).returning(Audit.id)
    return list(session.scalars(stmt))


def delete_audit(session: Session, tenant: Tenant, audit_id: uuid.UUID) -> None:
    """Erase one of the tenant's audits, in any state; 404 if it has none of that id."""
    found = session.scalar(select(Audit.id).where(Audit.id == audit_id, Audit.tenant_id == tenant.id))
    if found is None:
        raise NotFound("audit", audit_id)
    erase_audits(session, tenant.id, [found])


def purge_graph(session: Session, tenant: Tenant, graph_id: uuid.UUID) -> None:
    """Erase one of the tenant's graphs (one version), its models, its audits and their rows; 404 if none.

    The graph's row is locked first, which orders this against an audit being created for it."""
    stmt = select(Graph.id).where(Graph.id == graph_id, Graph.tenant_id == tenant.id).with_for_update()
    if session.scalar(stmt) is None:
        raise NotFound("graph", graph_id)
    erase_graph(session, tenant.id, graph_id)


def erase_graph(session: Session, tenant_id: uuid.UUID, graph_id: uuid.UUID) -> bool:
    """What :func:`purge_graph` deletes, for a graph already found (the retention sweep); only flushes. Return
    whether this call deleted the graph's row (``False``: a concurrent erasure did)."""
    audits = session.scalars(select(Audit.id).where(Audit.graph_id == graph_id)).all()
    erase_audits(session, tenant_id, audits)
    _delete_deliveries(session, tenant_id, WebhookDelivery.payload["data"]["graph_id"].as_string() == str(graph_id))
    session.execute(delete(SuppliedModel).where(SuppliedModel.graph_id == graph_id))
    return session.scalar(delete(Graph).where(Graph.id == graph_id).returning(Graph.id)) is not None


def _delete_deliveries(session: Session, tenant_id: uuid.UUID, matches: ColumnElement[bool]) -> None:
    hooks = select(Webhook.id).where(Webhook.tenant_id == tenant_id)
    session.execute(delete(WebhookDelivery).where(WebhookDelivery.webhook_id.in_(hooks), matches))
