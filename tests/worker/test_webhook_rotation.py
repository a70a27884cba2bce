"""A rotated secret keeps signing beside the new one until its overlap ends: a receiver that checks either accepts
the delivery meanwhile, and only the new one afterwards."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.session import now
from app.core.db.tables import Webhook, WebhookDelivery
from app.core.settings import Settings
from app.webhooks import delivery as webhooks
from app.webhooks.delivery import deliver
from app.webhooks.service import new_secret
from app.webhooks.signing import WebhookVerificationError, verify


@pytest.mark.parametrize("overlap_left", [timedelta(hours=1), -timedelta(seconds=1), None])
def test_the_rotated_secret_signs_until_its_overlap_ends(
    settings: Settings,
    sessions: sessionmaker[Session],
    tenant_id: uuid.UUID,
    monkeypatch: pytest.MonkeyPatch,
    overlap_left: timedelta | None,
) -> None:
    sent: list[tuple[str, dict[str, str]]] = []

    def post(url: str, body: str, headers: dict[str, str], settings: Settings) -> httpx.Response:
        sent.append((body, headers))
        return httpx.Response(204)

    monkeypatch.setattr(webhooks, "post", post)
    current, previous = new_secret(), new_secret()
    with sessions.begin() as session:
        hook = Webhook(tenant_id=tenant_id, url="https://hooks.test/h", events=["audit.failed"], secret=current)
        if overlap_left is not None:
            hook.previous_secret, hook.previous_secret_expires_at = previous, now() + overlap_left
        session.add(hook)
        session.flush()
        row = WebhookDelivery(webhook_id=hook.id, event="audit.failed", payload={"type": "audit.failed"})
        session.add(row)
        session.flush()
        delivery_id = row.id
    assert deliver(delivery_id, sessions, settings) is None
    ((body, headers),) = sent
    assert verify(body, headers, current) == {"type": "audit.failed"}
    signatures = headers["webhook-signature"].split()
    if overlap_left is not None and overlap_left > timedelta(0):
        assert len(signatures) == 2 and verify(body, headers, previous) == {"type": "audit.failed"}
    else:
        assert len(signatures) == 1
        with pytest.raises(WebhookVerificationError):
            verify(body, headers, previous)
