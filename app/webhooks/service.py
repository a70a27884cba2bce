"""Webhook subscriptions: creating (with a new secret), listing, deleting, and reading the delivery log.

Server-side request forgery: unless ``BIND_WEBHOOK_ALLOW_PRIVATE`` is on, a URL whose host is, or resolves
to, an address that is not globally routable (private, loopback, link-local, multicast, reserved, shared,
unspecified; IPv4 inside IPv6 included) is refused when subscribing (422), and again by the worker before
each delivery (:func:`public_addresses`), since a name's DNS records can change after it was checked. The
worker then connects to the address it checked, not to a second lookup of the name.
"""

from __future__ import annotations

import base64
import ipaddress
import secrets
import socket
import uuid
from datetime import timedelta
from urllib.parse import urlsplit

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.core.db.session import now
from app.core.db.tables import Tenant, Webhook, WebhookDelivery
from app.core.errors import NotFound, ValidationProblem
from app.core.pagination import newest_first
from app.core.settings import Settings
from app.webhooks.schemas import WebhookCreate, WebhookUpdate, check_filter
from app.webhooks.signing import SECRET_PREFIX

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
ALLOW_HINT = "set BIND_WEBHOOK_ALLOW_PRIVATE=true to deliver to such addresses"


class UnsafeDestination(ValueError):
    """The URL's host is or resolves to an address webhooks may not reach."""


def blocked_reason(address: IPAddress) -> str | None:
    """Why webhooks may not reach ``address`` (``None``: a global unicast address, allowed)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
        if embedded is not None:
            return blocked_reason(embedded)
    for flag, name in (
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local"),
        ("is_multicast", "multicast"),
        ("is_unspecified", "unspecified"),
        ("is_private", "private"),
        ("is_reserved", "reserved"),
    ):
        if getattr(address, flag):
            return name
    return None if address.is_global else "not globally routable"


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (an IP literal, in any form ``getaddrinfo`` reads, is itself)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: list[IPAddress] = []
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def unsafe_addresses(addresses: list[IPAddress]) -> list[str]:
    """``"<address> (<why>)"`` for each address webhooks may not reach."""
    return [f"{a} ({why})" for a in addresses if (why := blocked_reason(a)) is not None]


def public_addresses(url: str) -> list[IPAddress]:
    """The addresses of ``url``'s host, all of them globally routable; :class:`UnsafeDestination` otherwise.

    The worker calls this before each delivery (``BIND_WEBHOOK_ALLOW_PRIVATE`` off) and connects to the first.
    """
    host, port = _host_port(url)
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError) as exc:
        raise UnsafeDestination(f"cannot resolve {host!r} ({exc})") from exc
    if not addresses:
        raise UnsafeDestination(f"{host!r} has no address")
    if bad := unsafe_addresses(addresses):
        raise UnsafeDestination(f"{host!r} resolves to {', '.join(bad)}; {ALLOW_HINT}")
    return addresses


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


def check_destination(url: str) -> None:
    """422 when ``url``'s host is or resolves to an address webhooks may not reach.

    A name that does not resolve now is accepted: what it resolves to is checked at each delivery anyway.
    """
    host, port = _host_port(url)
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError):
        return
    if bad := unsafe_addresses(addresses):
        why = f"the host resolves to {', '.join(bad)}, which webhooks may not reach"
        raise ValidationProblem(f"url: {why} ({ALLOW_HINT}).", errors=[{"field": "url", "message": why}])


def create_webhook(session: Session, tenant: Tenant, body: WebhookCreate, *, settings: Settings) -> tuple[Webhook, str]:
    """Subscribe after checking the URL (and, unless ``webhook_allow_private``, where it points): 422 otherwise."""
    url = check_url(body.url)
    if not settings.webhook_allow_private:
        check_destination(url)
    secret = new_secret()
    row = Webhook(
        tenant_id=tenant.id, url=url, events=sorted(set(body.events)), warning_codes=body.warning_codes, secret=secret
    )
    session.add(row)
    session.flush()
    return row, secret


def update_webhook(session: Session, tenant: Tenant, webhook_id: uuid.UUID, body: WebhookUpdate) -> Webhook:
    """Change a subscription's events and warning codes (those given; ``warning_codes: null`` lifts the filter); its
    URL, secret and delivery log stay. Deliveries already written keep going; events from now on follow the change.

    Raises:
        NotFound: no such webhook of the tenant.
        ValidationProblem: ``events`` null, or warning codes without ``audit.warned`` among the events.
    """
    row = get_webhook(session, tenant, webhook_id)
    given = body.model_fields_set
    if "events" in given and body.events is None:
        raise ValidationProblem(
            "events: a subscription takes at least one event (delete it to take none).",
            errors=[{"field": "events", "message": "must be a list of at least one event"}],
        )
    events: list[str] = sorted(set(body.events)) if body.events is not None else list(row.events)
    codes = body.warning_codes if "warning_codes" in given else row.warning_codes
    try:
        check_filter(events, codes)
    except ValueError as exc:
        why = [{"field": "warning_codes", "message": str(exc)}]
        raise ValidationProblem(f"warning_codes: {exc}.", errors=why) from exc
    row.events, row.warning_codes = events, codes
    session.flush()
    return row


MAX_OVERLAP_SECONDS = 7 * 24 * 3600
"""The longest a rotated secret may keep signing beside the new one."""


def rotate_secret(
    session: Session, tenant: Tenant, webhook_id: uuid.UUID, *, overlap_seconds: int
) -> tuple[Webhook, str]:
    """A new signing secret for the webhook; the one it replaces signs beside it for ``overlap_seconds`` more (0:
    stops at once, for a secret that leaked), so a receiver moves to the new one without refusing a delivery. A
    secret an earlier rotation kept is dropped. URL, events and log stay.

    Returns:
        The webhook and its new secret (shown once).

    Raises:
        NotFound: no such webhook of the tenant.
    """
    row = get_webhook(session, tenant, webhook_id)
    secret = new_secret()
    if overlap_seconds > 0:
        row.previous_secret = row.secret
        row.previous_secret_expires_at = now() + timedelta(seconds=overlap_seconds)
    else:
        row.previous_secret, row.previous_secret_expires_at = None, None
    row.secret = secret
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


def delivery_page(
    session: Session, webhook: Webhook, *, limit: int, state: str | None = None, page_token: str | None = None
) -> tuple[list[WebhookDelivery], str | None]:
    """One page of the webhook's delivery log, newest first (``state``: only those), and the next page's token."""
    stmt = select(WebhookDelivery).where(WebhookDelivery.webhook_id == webhook.id)
    if state is not None:
        stmt = stmt.where(WebhookDelivery.state == state)
    return newest_first(session, stmt, WebhookDelivery, kind="deliveries", limit=limit, token=page_token)


def failed_count(session: Session, webhook: Webhook) -> int:
    """How many of the webhook's deliveries failed (every retry spent)."""
    stmt = select(func.count()).where(WebhookDelivery.webhook_id == webhook.id, WebhookDelivery.state == "failed")
    return int(session.scalar(stmt) or 0)


def deliveries(session: Session, webhook: Webhook, *, limit: int) -> list[WebhookDelivery]:
    """The webhook's ``limit`` newest deliveries."""
    return delivery_page(session, webhook, limit=limit)[0]
