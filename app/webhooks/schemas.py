"""Webhook subscriptions (``/v1/webhooks``) and their delivery log."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

WebhookEvent = Literal["audit.succeeded", "audit.failed", "schedule.threshold_exceeded", "audit.warned"]


class WebhookCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2000, description="An http(s) URL without credentials.")
    events: list[WebhookEvent] = Field(min_length=1, max_length=4)


class WebhookRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    url: str
    events: list[WebhookEvent]
    created_at: datetime


class WebhookCreated(WebhookRead):
    secret: str
    """``whsec_`` + base64: verifies the deliveries' signatures. Shown only in this answer."""


class WebhookPage(BaseModel):
    items: list[WebhookRead]
    next_page_token: str | None = None


class DeliveryRead(BaseModel):
    """One event sent (or being sent) to the subscription. ``id`` is the ``webhook-id`` header."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    event: WebhookEvent
    payload: dict[str, Any]
    state: Literal["pending", "succeeded", "failed"]
    attempts: int
    response_status: int | None
    """The receiver's status code at the last attempt (null: no answer)."""
    last_error: str | None
    next_attempt_at: datetime | None
    created_at: datetime
    delivered_at: datetime | None


class DeliveryPage(BaseModel):
    webhook_id: uuid.UUID
    items: list[DeliveryRead]
    """Newest first."""
