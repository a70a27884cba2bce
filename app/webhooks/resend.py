"""Deliveries an admin asks for: a test event (``webhook.ping``) that checks a receiver before any audit finishes,
and a delivery sent again (after a receiver was down past the retries, or lost what it received).

Both go through the delivery task like any event (signed, retried with backoff, logged), sent after the request's
commit. A delivery sent again keeps its ``webhook-id`` (``msg_<delivery id>``), so a receiver that processed it
already can drop it, as Standard Webhooks asks of every retry; its attempts count from 0 again (the trail keeps
that it was sent again: ``webhook.redeliver``)."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime

from sqlalchemy import func, select, update
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
    if not _reset(session, [row.id], ("failed", "succeeded")):  # one UPDATE: two requests cannot both send it
        session.refresh(row)
        raise Conflict(
            f"Delivery {delivery_id} is still being sent (attempt {row.attempts + 1} is due"
            f"{' at ' + row.next_attempt_at.isoformat() if row.next_attempt_at else ''}); send it again once it "
            "has succeeded or failed.",
            slug="delivery-pending",
            title="Delivery still pending",
        )
    session.refresh(row)
    _send_after_commit(session, publisher, row.id)
    return row


RECOVER_LIMIT = 1000
"""The most failed deliveries one ``recover`` sends again (the oldest first); ``remaining`` counts the rest."""


def recover(
    session: Session, tenant: Tenant, webhook_id: uuid.UUID, *, since: datetime | None, publisher: Publisher
) -> tuple[int, int]:
    """Send again the webhook's failed deliveries (created at or after ``since``, where given), the oldest first, at
    most :data:`RECOVER_LIMIT`: after an outage of the receiver, one call instead of one per delivery. Each keeps its
    payload and ``webhook-id`` (as :func:`redeliver`).

    Returns:
        ``(resent, remaining)``: how many were sent again, and how many failed ones are left (call again).

    Raises:
        NotFound: no such webhook of the tenant.
    """
    hook = get_webhook(session, tenant, webhook_id)
    stmt = select(WebhookDelivery).where(WebhookDelivery.webhook_id == hook.id, WebhookDelivery.state == "failed")
    if since is not None:
        stmt = stmt.where(WebhookDelivery.created_at >= since)
    oldest = stmt.with_only_columns(WebhookDelivery.id).order_by(WebhookDelivery.created_at, WebhookDelivery.id)
    ids = _reset(session, list(session.scalars(oldest.limit(RECOVER_LIMIT))), ("failed",))
    remaining = int(session.scalar(select(func.count()).select_from(stmt.subquery())) or 0)
    if ids:
        _send_after_commit(session, publisher, *ids)
    return len(ids), remaining


def delivery(session: Session, tenant: Tenant, webhook_id: uuid.UUID, delivery_id: uuid.UUID) -> WebhookDelivery:
    """One delivery of the tenant's webhook; :class:`NotFound` for another webhook's or none."""
    hook = get_webhook(session, tenant, webhook_id)
    row = session.scalar(
        select(WebhookDelivery).where(WebhookDelivery.id == delivery_id, WebhookDelivery.webhook_id == hook.id)
    )
    if row is None:
        raise NotFound("delivery", delivery_id)
    return row


def _reset(session: Session, ids: list[uuid.UUID], states: tuple[str, ...]) -> list[uuid.UUID]:
    """Make the deliveries ``ids`` that are in one of ``states`` pending and due now, their attempts from 0, in one
    ``UPDATE`` (a row another request made pending meanwhile is left out); the ids it changed."""
    if not ids:
        return []
    changed = session.scalars(
        update(WebhookDelivery)
        .where(WebhookDelivery.id.in_(ids), WebhookDelivery.state.in_(states))
        .values(state="pending", attempts=0, next_attempt_at=now(), delivered_at=None)
        .returning(WebhookDelivery.id)
    )
    return list(changed)


def _send_after_commit(session: Session, publisher: Publisher, *delivery_ids: uuid.UUID) -> None:
    """Send the deliveries' tasks once the request commits; a broker that refuses is logged, and the rows, pending
    and due, are sent again by the sweeper (``resend_stale``), as a send lost in a crash is."""

    def send() -> None:
        try:
            send_deliveries(publisher, list(delivery_ids))
        except Exception:
            log.warning("could not enqueue webhook deliveries; the sweeper sends them again", exc_info=True)

    after_commit(session, send)
