"""The audit's task: its name, how it is sent, and its body. The worker registers :func:`run_audit` under
:data:`RUN_AUDIT` (``worker/tasks.py``); everything else sends it by that name through a
:class:`~app.core.publisher.Publisher`.
"""

from __future__ import annotations

import logging
import uuid

from sqlalchemy.orm import Session, sessionmaker

from app.audits.run import Outcome, execute
from app.audits.turns import next_turn
from app.core.logs import audit_id as audit_id_var
from app.core.publisher import Publisher
from app.core.settings import Settings
from app.influence.chunks import empty_cache

RUN_AUDIT = "bind.run_audit"
"""The audit task's name; its only argument is the audit id as a string (also its Celery task id)."""

log = logging.getLogger(__name__)


def send_run_audit(publisher: Publisher, audit_id: uuid.UUID) -> bool:
    """Send the audit's task; ``False`` (logged) if the broker refused: the row stays queued and the sweeper
    re-sends it."""
    try:
        publisher.send(RUN_AUDIT, [str(audit_id)], task_id=str(audit_id))
    except Exception:
        log.warning("could not enqueue audit %s; it stays queued for the sweeper", audit_id, exc_info=True)
        return False
    return True


def run_audit(
    audit_id: str, *, publisher: Publisher, sessions: sessionmaker[Session], settings: Settings, device: str
) -> Outcome:
    """Run the audit whose turn it is once (a no-op for finished or cancelled audits; see
    :func:`app.audits.run.execute`), then wake the next audit when tenants take turns.

    Every log line written while it runs carries ``audit_id`` (a context variable read by the JSON log
    formatter).
    """
    token = audit_id_var.set(audit_id[:64])
    empty_cache()  # the graph and model kept from another audit's chunks: this audit needs the memory
    try:
        outcome = execute(audit_id, sessions=sessions, settings=settings, device=device, publisher=publisher)
        if outcome.status != "skipped" and settings.tenant_max_running > 0:
            wake_next(publisher, sessions, settings)
        return outcome
    finally:
        audit_id_var.reset(token)


def wake_next(publisher: Publisher, sessions: sessionmaker[Session], settings: Settings) -> None:
    """Send a message for the audit whose turn it is now, if any.

    With ``BIND_TENANT_MAX_RUNNING``, a worker that got a message while every queued audit's tenant was at
    its limit ran nothing and spent the message; the audit that ended just now freed a place, so a message
    is sent for it. A spare message is a no-op (nothing queued); a missing one is re-sent by the sweeper.
    """
    try:
        with sessions() as session:
            turn = next_turn(session, max_running=settings.tenant_max_running, lock=False)
        if turn is not None:
            publisher.send(RUN_AUDIT, [str(turn)])
    except Exception:
        log.warning("could not send the next audit's message; the sweeper re-sends it", exc_info=True)
