"""The webhook delivery task: one attempt at one delivery row. The worker registers :func:`deliver_webhook`
under :data:`DELIVER_WEBHOOK` (``worker/tasks.py``); the rows are written by :mod:`app.webhooks.events` and
sent by :func:`send_deliveries` after their commit.
"""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session, sessionmaker

from app.core.publisher import Publisher
from app.core.settings import Settings
from app.webhooks.delivery import deliver, stale_deliveries

DELIVER_WEBHOOK = "bind.deliver_webhook"
"""One delivery attempt; its only argument is the delivery id as a string."""


def send_deliveries(publisher: Publisher, ids: list[uuid.UUID], countdown: float | None = None) -> None:
    """Send the delivery tasks (after the commit that wrote them)."""
    for delivery_id in ids:
        publisher.send(DELIVER_WEBHOOK, [str(delivery_id)], countdown=countdown)


def deliver_webhook(
    delivery_id: str, *, publisher: Publisher, sessions: sessionmaker[Session], settings: Settings
) -> None:
    """One attempt at the delivery; the next attempt is sent with its backoff as the countdown on failure."""
    retry = deliver(uuid.UUID(delivery_id), sessions, settings)
    if retry is not None:
        send_deliveries(publisher, [uuid.UUID(delivery_id)], countdown=retry)


def resend_stale(publisher: Publisher, sessions: sessionmaker[Session], *, grace: float = 60.0) -> list[uuid.UUID]:
    """Re-send pending deliveries overdue by ``grace`` seconds (their task was lost, or never sent); their ids."""
    ids = stale_deliveries(sessions, grace=grace)
    send_deliveries(publisher, ids)
    return ids
