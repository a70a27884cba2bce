"""Webhook subscriptions: creating (with a new secret), listing, deleting, and reading the delivery log."""

from __future__ import annotations

import base64
import secrets
import uuid
from urllib.parse import urlsplit

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db.models import Tenant, Webhook, WebhookDelivery
from app.errors import NotFound, ValidationProblem
from app.pagination import newest_first
from app.schemas.webhooks import WebhookCreate
from app.webhook_verify import SECRET_PREFIX


def new_secret() -> str:
    """``whsec_`` + base64 of 32 random bytes (the Standard Webhooks form)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def check_url(url: str) -> str:
    """Only ``http``/``https`` URLs with a host and without user:password (422 otherwise)."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
        _ = parts.port  # raises on a malformed port
    except ValueError:
        host = None
        parts = urlsplit("")
    why = None
    if parts.scheme not in ("http", "https"):
        why = "only http and https URLs"
    elif not host:
        why = "the URL has no host"
    elif parts.username is not None or parts.password is not None:
        why = "credentials in the URL are not allowed"
    if why is not None:
        raise ValidationProblem(f"url: {why}.", errors=[{"field": "url", "message": why}])
    return url.strip()


def create_webhook(session: Session, tenant: Tenant, body: WebhookCreate) -> tuple[Webhook, str]:
    secret = new_secret()
    row = Webhook(tenant_id=tenant.id, url=check_url(body.url), events=sorted(set(body.events)), secret=secret)
    session.add(row)
    session.flush()
    return row, secret


def get_webhook(session: Session, tenant: Tenant, webhook_id: uuid.UUID) -> Webhook:
    row = session.scalar(select(Webhook).where(Webhook.id == webhook_id, Webhook.tenant_id == tenant.id))
    if row is None:
        raise NotFound("webhook", webhook_id)
    return row


def list_webhooks(
    session: Session, tenant: Tenant, *, limit: int, page_token: str | None
) -> tuple[list[Webhook], str | None]:
    stmt = select(Webhook).where(Webhook.tenant_id == tenant.id)
    return newest_first(session, stmt, Webhook, kind="webhooks", limit=limit, token=page_token)


def delete_webhook(session: Session, tenant: Tenant, webhook_id: uuid.UUID) -> None:
    """Delete a subscription and its delivery log; pending retries are dropped."""
    row = get_webhook(session, tenant, webhook_id)
    session.execute(delete(Webhook).where(Webhook.id == row.id))
    session.expunge(row)


def deliveries(session: Session, webhook: Webhook, *, limit: int) -> list[WebhookDelivery]:
    stmt = (
        select(WebhookDelivery)
        .where(WebhookDelivery.webhook_id == webhook.id)
        .order_by(WebhookDelivery.created_at.desc(), WebhookDelivery.id.desc())
        .limit(limit)
    )
    return list(session.scalars(stmt))
