"""Deliveries an admin asks for: a test event (``webhook.ping``) that checks a receiver before any audit finishes,
and a delivery sent again (after a receiver was down past the retries, or lost what it received).

Both go through the delivery task like any event (signed, retried with backoff, logged), sent after the request's
commit. A delivery sent again keeps its ``webhook-id`` (``msg_<delivery id>``), so a receiver that processed it
already can drop it, as Standard Webhooks asks of every retry; its attempts count from 0 again (the trail keeps
that it was sent again: ``webhook.redeliver``)."""

from __future__ import annotations

import logging
import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.db.session import after_commit, now
from app.core.db.tables import Tenant, WebhookDelivery
from app.core.errors import Conflict, NotFound
from app.core.publisher import Publisher
from app.webhooks.service import get_webhook
from app.webhooks.tasks import send_deliveries

log = logging.getLogger(__name__)

PING = "webhook.ping"
"""The test event's type; no subscription takes it, each webhook gets it only when asked."""


def ping(session: Session, tenant: Tenant, webhook_id: uuid.UUID, *, publisher: Publisher) -> WebhookDelivery:
    """Queue a ``webhook.ping`` delivery to the webhook (its ``data``: the subscription's id, events and warning
    codes), sent after the commit.

    Raises:
        NotFound: no such webhook of the tenant.
    """
    hook = get_webhook(session, tenant, webhook_id)
    t = now()
    data = {
        "webhook_id": str(hook.id),
        "events": list(hook.events),
        "warning_codes": hook.warning_codes,
        "message": "a test event sent on request: answer 2xx once the signature checks out",
    }
    row = WebhookDelivery(
        webhook_id=hook.id,
        event=PING,
        state="pending",
        attempts=0,
        payload={"type": PING, "timestamp": t.isoformat(), "data": data},
        next_attempt_at=t,
        created_at=t,
    )
    session.add(row)
    session.flush()
    _send_after_commit(session, publisher, row.id)
    return row


def redeliver(
    session: Session, tenant: Tenant, webhook_id: uuid.UUID, delivery_id: uuid.UUID, *, publisher: Publisher
) -> WebhookDelivery:
    """Send a finished delivery (``failed`` or ``succeeded``) again: pending, its attempts from 0, the same payload
    and ``webhook-id``.

    Raises:
        NotFound: no such webhook of the tenant, or no such delivery of it.
        Conflict: the delivery is still pending (``delivery-pending``: its retries are under way).
    """
    row = delivery(session, tenant, webhook_id, delivery_id)
    if row.state == "pending":
        raise Conflict(
            f"Delivery {delivery_id} is still being sent (attempt {row.attempts + 1} is due"
            f"{' at ' + row.next_attempt_at.isoformat() if row.next_attempt_at else ''}); send it again once it "
            "has succeeded or failed.",
            slug="delivery-pending",
            title="Delivery still pending",
        )
    row.state, row.attempts, row.next_attempt_at, row.delivered_at = "pending", 0, now(), None
    session.flush()
    _send_after_commit(session, publisher, row.id)
    return row


def delivery(session: Session, tenant: Tenant, webhook_id: uuid.UUID, delivery_id: uuid.UUID) -> WebhookDelivery:
    """One delivery of the tenant's webhook; :class:`NotFound` for another webhook's or none."""
    hook = get_webhook(session, tenant, webhook_id)
    row = session.scalar(
        select(WebhookDelivery).where(WebhookDelivery.id == delivery_id, WebhookDelivery.webhook_id == hook.id)
    )
    if row is None:
        raise NotFound("delivery", delivery_id)
    return row


def _send_after_commit(session: Session, publisher: Publisher, delivery_id: uuid.UUID) -> None:
    """Send the delivery's task once the request commits; a broker that refuses is logged, and the row, pending and
    due, is sent again by the sweeper (``resend_stale``), as a send lost in a crash is."""

    def send() -> None:
        try:
            send_deliveries(publisher, [delivery_id])
        except Exception:
            log.warning("could not enqueue webhook delivery %s; the sweeper sends it again", delivery_id, exc_info=True)

    after_commit(session, send)
