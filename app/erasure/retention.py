"""``BIND_RETENTION_DAYS``: the sweeper (``app/audits/recovery.py``, a thread in every worker) erases what is older.

Finished audits whose ``finished_at`` is older than the period, and graphs uploaded before it (with everything
:func:`app.erasure.service.erase_graph` erases) unless an audit of theirs is still queued or running (then the
next sweep takes them). Each erasure is one trail entry (``audit.expire``, ``graph.expire``; actor ``system``), written
only by the sweep whose ``DELETE`` removed the row, however many workers sweep at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import exists, select
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.session import now
from app.core.db.tables import ACTIVE_STATES, FINAL_STATES, Audit, Graph
from app.erasure.service import erase_audits, erase_graph
from app.trail.record import append

log = logging.getLogger(__name__)

BATCH = 200
"""Most audits, then graphs, one sweep erases (short transactions; the next sweep goes on)."""


@dataclass(frozen=True)
class Expired:
    audits: int
    graphs: int


def expire(sessions: sessionmaker[Session], days: int, *, at: datetime | None = None) -> Expired:
    """Erase what ``days`` of retention no longer cover (0: keep everything); commit; say how much."""
    if days <= 0:
        return Expired(0, 0)
    cutoff = (at or now()) - timedelta(days=days)
    with sessions.begin() as session:
        old = session.execute(
            select(Audit.id, Audit.tenant_id)
            .where(Audit.state.in_(FINAL_STATES), Audit.finished_at < cutoff)
            .limit(BATCH)
        ).all()
        audits = [(a, t) for a, t in old if erase_audits(session, t, [a])]  # those no concurrent sweep took
        for audit_id, tenant_id in audits:
            append(
                session,
                tenant_id=tenant_id,
                actor="system",
                action="audit.expire",
                target=f"/audits/{audit_id}",
                outcome="succeeded",
            )
    with sessions.begin() as session:
        busy = exists().where(Audit.graph_id == Graph.id, Audit.state.in_(ACTIVE_STATES))
        uploaded = session.execute(
            select(Graph.id, Graph.tenant_id).where(Graph.created_at < cutoff, ~busy).limit(BATCH)
        ).all()
        graphs = [(g, t) for g, t in uploaded if erase_graph(session, t, g)]
        for graph_id, tenant_id in graphs:
            append(
                session,
                tenant_id=tenant_id,
                actor="system",
                action="graph.expire",
                target=f"/graphs/{graph_id}",
                outcome="succeeded",
            )
    if audits or graphs:
        log.info("retention (%d days): erased %d audits and %d graphs", days, len(audits), len(graphs))
    return Expired(len(audits), len(graphs))
