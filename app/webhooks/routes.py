"""``/v1/webhooks``: subscribe URLs to audit and schedule events; signed deliveries with a log. Admin keys only."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response, status

from app.core.deps import BrokerDep, SessionDep, SettingsDep
from app.core.pagination import DEFAULT_LIMIT, MAX_LIMIT
from app.core.problem_schema import problem_responses
from app.tenants.deps import AdminTenant
from app.trail.record import trailed
from app.webhooks import resend, service
from app.webhooks.schemas import (
    DeliveryPage,
    DeliveryRead,
    RecoverRequest,
    RecoverResult,
    RotateRequest,
    SecretRotated,
    WebhookCreate,
    WebhookCreated,
    WebhookPage,
    WebhookRead,
    WebhookUpdate,
)

router = APIRouter(prefix="/webhooks", tags=["webhooks"])

LimitQuery = Annotated[int, Query(ge=1, le=MAX_LIMIT)]


@router.post(
    "", status_code=status.HTTP_201_CREATED, response_model=WebhookCreated, dependencies=[trailed("webhook.create")]
)
def create_webhook(
    body: WebhookCreate, response: Response, session: SessionDep, tenant: AdminTenant, settings: SettingsDep
) -> Any:
    """Subscribe ``url`` to ``events``. The answer holds the signing ``secret``, shown this once. A URL whose
    host is or resolves to a private, loopback, link-local, multicast or reserved address is refused (422)
    unless the server allows them (``BIND_WEBHOOK_ALLOW_PRIVATE``)."""
    row, secret = service.create_webhook(session, tenant, body, settings=settings)
    response.headers["Location"] = f"/v1/webhooks/{row.id}"
    return WebhookCreated(
        id=row.id,
        url=row.url,
        events=row.events,  # type: ignore[arg-type]  # validated event names
        warning_codes=row.warning_codes,
        created_at=row.created_at,
        secret=secret,
    )


@router.get("", response_model=WebhookPage)
def list_webhooks(
    session: SessionDep,
    tenant: AdminTenant,
    limit: LimitQuery = DEFAULT_LIMIT,
    page_token: Annotated[str | None, Query(max_length=500)] = None,
) -> WebhookPage:
    rows, token = service.list_webhooks(session, tenant, limit=limit, page_token=page_token)
    return WebhookPage(items=[WebhookRead.model_validate(r) for r in rows], next_page_token=token)


@router.get("/{webhook_id}", response_model=WebhookRead, responses=problem_responses(404))
def read_webhook(webhook_id: uuid.UUID, session: SessionDep, tenant: AdminTenant) -> Any:
    return service.get_webhook(session, tenant, webhook_id)


@router.patch(
    "/{webhook_id}",
    response_model=WebhookRead,
    responses=problem_responses(404),
    dependencies=[trailed("webhook.update", "/webhooks/{webhook_id}")],
)
def update_webhook(webhook_id: uuid.UUID, body: WebhookUpdate, session: SessionDep, tenant: AdminTenant) -> Any:
    """Change ``events`` and ``warning_codes`` (``null`` lifts the filter); a key left out keeps its value. The URL
    and the signing secret stay, so the receiver needs no change."""
    return service.update_webhook(session, tenant, webhook_id, body)


@router.delete(
    "/{webhook_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404),
    dependencies=[trailed("webhook.delete", "/webhooks/{webhook_id}")],
)
def delete_webhook(webhook_id: uuid.UUID, session: SessionDep, tenant: AdminTenant) -> Response:
    service.delete_webhook(session, tenant, webhook_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{webhook_id}/deliveries", response_model=DeliveryPage, responses=problem_responses(400, 404))
def list_deliveries(
    webhook_id: uuid.UUID,
    session: SessionDep,
    tenant: AdminTenant,
    limit: LimitQuery = 100,
    state: Annotated[Literal["pending", "succeeded", "failed"] | None, Query()] = None,
    page_token: Annotated[str | None, Query(max_length=500)] = None,
) -> DeliveryPage:
    """The delivery log, newest first: event, payload, state, attempts, the receiver's last status; ``state``: only
    those (``failed``: the ones to send again); a page at a time (``next_page_token``)."""
    webhook = service.get_webhook(session, tenant, webhook_id)
    rows, token = service.delivery_page(session, webhook, limit=limit, state=state, page_token=page_token)
    items = [DeliveryRead.model_validate(r) for r in rows]
    return DeliveryPage(webhook_id=webhook.id, items=items, next_page_token=token)


@router.get("/{webhook_id}/deliveries/{delivery_id}", response_model=DeliveryRead, responses=problem_responses(404))
def read_delivery(webhook_id: uuid.UUID, delivery_id: uuid.UUID, session: SessionDep, tenant: AdminTenant) -> Any:
    """One delivery: its state, attempts and the receiver's last status (poll a test event's or a resent one's)."""
    return resend.delivery(session, tenant, webhook_id, delivery_id)


@router.post(
    "/{webhook_id}/ping",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DeliveryRead,
    responses=problem_responses(404),
    dependencies=[trailed("webhook.ping", "/webhooks/{webhook_id}")],
)
def ping_webhook(
    webhook_id: uuid.UUID, response: Response, session: SessionDep, tenant: AdminTenant, broker: BrokerDep
) -> Any:
    """Send a test event, ``webhook.ping``, to the webhook now (whatever events it takes): signed, retried and logged
    like any delivery, so a receiver's signature check can be tried before an audit finishes. 202: the delivery,
    pending; ``Location`` is where to read how it went."""
    row = resend.ping(session, tenant, webhook_id, publisher=broker)
    response.headers["Location"] = f"/v1/webhooks/{webhook_id}/deliveries/{row.id}"
    return row


@router.post(
    "/{webhook_id}/deliveries/{delivery_id}/redeliver",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DeliveryRead,
    responses=problem_responses(404, 409),
    dependencies=[trailed("webhook.redeliver", "/webhooks/{webhook_id}/deliveries/{delivery_id}")],
)
def redeliver(
    webhook_id: uuid.UUID,
    delivery_id: uuid.UUID,
    response: Response,
    session: SessionDep,
    tenant: AdminTenant,
    broker: BrokerDep,
) -> Any:
    """Send a finished delivery again (a receiver that was down past the retries, or lost it): the same payload and
    ``webhook-id`` (a receiver that has it already can drop it), its attempts from 0. 409 ``delivery-pending`` while
    its retries are under way. 202: the delivery, pending."""
    row = resend.redeliver(session, tenant, webhook_id, delivery_id, publisher=broker)
    response.headers["Location"] = f"/v1/webhooks/{webhook_id}/deliveries/{row.id}"
    return row


@router.post(
    "/{webhook_id}/recover",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=RecoverResult,
    responses=problem_responses(404),
    dependencies=[trailed("webhook.recover", "/webhooks/{webhook_id}")],
)
def recover(
    webhook_id: uuid.UUID, body: RecoverRequest, session: SessionDep, tenant: AdminTenant, broker: BrokerDep
) -> RecoverResult:
    """Send every failed delivery again (``since``: those created at or after it), the oldest first, at most 1000 a
    call (``remaining``: how many are left): after a receiver's outage, one call. Each keeps its payload and
    ``webhook-id``, its attempts from 0."""
    resent, remaining = resend.recover(session, tenant, webhook_id, since=body.since, publisher=broker)
    return RecoverResult(webhook_id=webhook_id, resent=resent, remaining=remaining)


@router.post(
    "/{webhook_id}/rotate-secret",
    response_model=SecretRotated,
    responses=problem_responses(404),
    dependencies=[trailed("webhook.rotate_secret", "/webhooks/{webhook_id}")],
)
def rotate_secret(webhook_id: uuid.UUID, body: RotateRequest, session: SessionDep, tenant: AdminTenant) -> Any:
    """A new signing secret, shown this once. The replaced one keeps signing beside it for ``overlap_seconds``
    (default a day; 0 for a secret that leaked), so a receiver that checks either accepts every delivery meanwhile.
    URL, events and the delivery log stay."""
    row, secret = service.rotate_secret(session, tenant, webhook_id, overlap_seconds=body.overlap_seconds)
    return SecretRotated(id=row.id, secret=secret, previous_secret_expires_at=row.previous_secret_expires_at)
