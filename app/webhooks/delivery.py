"""Webhook delivery: one signed POST per attempt, retried with bounded exponential backoff, all logged.
Signed with the subscription's secret and, during a rotation's overlap, with the secret it replaced too.

An attempt succeeds on any 2xx answer. Otherwise (another status, a timeout, a refused connection) the
delivery's ``attempts`` goes up and, until ``BIND_WEBHOOK_MAX_ATTEMPTS``, the task is sent again with a
countdown of ``BIND_WEBHOOK_RETRY_BASE · 2^(attempts−1)`` seconds, capped at ``BIND_WEBHOOK_RETRY_MAX``; after
that it is ``failed``. Every retry of one delivery keeps its ``webhook-id`` so receivers can drop duplicates.
Redirects are not followed.

Unless ``BIND_WEBHOOK_ALLOW_PRIVATE`` is on, each attempt first resolves the URL's host and refuses (a failed
attempt, retried like any other: DNS may change back) when any address is not globally routable; it then
connects to the first checked address, with the URL's host in ``Host`` and, for https, in SNI and the
certificate check, so a second DNS answer (rebinding) cannot send the request elsewhere.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.session import now
from app.core.db.tables import Webhook, WebhookDelivery
from app.core.settings import Settings
from app.webhooks.service import IPAddress, UnsafeDestination, public_addresses
from app.webhooks.signing import signature_header

log = logging.getLogger(__name__)


def backoff(attempts: int, settings: Settings) -> float:
    return float(min(settings.webhook_retry_base * 2 ** max(attempts - 1, 0), settings.webhook_retry_max))


def pinned(url: str, address: IPAddress) -> tuple[httpx.URL, dict[str, str], dict[str, str]]:
    """The request for ``url`` sent to ``address``: its URL, its ``Host`` header and its httpx extensions."""
    original = httpx.URL(url)
    extensions = {"sni_hostname": original.host} if original.scheme == "https" else {}
    return original.copy_with(host=str(address)), {"host": original.netloc.decode("ascii")}, extensions


def post(url: str, body: str, headers: dict[str, str], settings: Settings) -> httpx.Response:
    """One POST to ``url``: to an address checked just now unless private addresses are allowed.

    Raises :class:`UnsafeDestination` when the host resolves to an address webhooks may not reach.
    """
    if settings.webhook_allow_private:
        return httpx.post(url, content=body, headers=headers, timeout=settings.webhook_timeout, follow_redirects=False)
    target, host, extensions = pinned(url, public_addresses(url)[0])
    with httpx.Client(timeout=settings.webhook_timeout, follow_redirects=False) as client:
        return client.post(target, content=body, headers={**headers, **host}, extensions=extensions)


def deliver(delivery_id: uuid.UUID, sessions: sessionmaker[Session], settings: Settings) -> float | None:
    """Make one attempt at a pending delivery; return the countdown of the retry, or ``None``."""
    with sessions() as session:
        row = session.execute(
            select(
                WebhookDelivery.payload,
                WebhookDelivery.state,
                WebhookDelivery.attempts,
                Webhook.url,
                Webhook.secret,
                Webhook.previous_secret,
                Webhook.previous_secret_expires_at,
            )
            .join(Webhook, Webhook.id == WebhookDelivery.webhook_id)
            .where(WebhookDelivery.id == delivery_id)
        ).one_or_none()
    if row is None or row.state != "pending":
        return None
    body = json.dumps(row.payload, separators=(",", ":"))
    msg_id, timestamp = f"msg_{delivery_id.hex}", int(time.time())
    headers = {
        "content-type": "application/json",
        "user-agent": "bind-audit-webhooks/1",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(msg_id, timestamp, body, row.secret, *_overlapping(row)),
    }
    status, error = None, None
    try:
        response = post(row.url, body, headers, settings)
        status = response.status_code
        if not 200 <= status < 300:
            error = f"HTTP {status}"
    except UnsafeDestination as exc:
        error = f"refused: {exc}"[:500]
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"[:500]
    attempts, t = row.attempts + 1, now()
    values: dict[str, object] = {"attempts": attempts, "response_status": status, "last_error": error}
    retry = None
    if error is None:
        values.update(state="succeeded", delivered_at=t, next_attempt_at=None)
    elif attempts >= settings.webhook_max_attempts:
        values.update(state="failed", next_attempt_at=None)
    else:
        retry = backoff(attempts, settings)
        values.update(next_attempt_at=t + timedelta(seconds=retry))
    with sessions.begin() as session:
        session.execute(
            update(WebhookDelivery)
            .where(
                WebhookDelivery.id == delivery_id,
                WebhookDelivery.state == "pending",
                WebhookDelivery.attempts == row.attempts,
            )
            .values(**values)
        )
    log.info("webhook delivery %s attempt %d: %s", delivery_id, attempts, error or f"HTTP {status}")
    return retry


def _overlapping(row: Any) -> list[str]:
    """The rotated secret that still signs beside the current one (its overlap not over), or none."""
    until = row.previous_secret_expires_at
    return [row.previous_secret] if row.previous_secret and until is not None and until > now() else []


def stale_deliveries(sessions: sessionmaker[Session], *, grace: float = 60.0) -> list[uuid.UUID]:
    """Pending deliveries overdue by ``grace`` seconds (their task was lost, or never sent), their next attempt
    moved to now (:func:`app.webhooks.tasks.resend_stale` sends them)."""
    t = now()
    with sessions.begin() as session:
        ids = session.scalars(
            update(WebhookDelivery)
            .where(WebhookDelivery.state == "pending", WebhookDelivery.next_attempt_at < t - timedelta(seconds=grace))
            .values(next_attempt_at=t)
            .returning(WebhookDelivery.id)
        ).all()
    return list(ids)
