"""Webhook subscriptions (``/v1/webhooks``) and their delivery log."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from app.gates import WARNING_CODES

WebhookEvent = Literal["audit.succeeded", "audit.failed", "schedule.threshold_exceeded", "audit.warned"]


def _warning_codes() -> Any:
    """The ``warning_codes`` field (a new one for each model that has it)."""
    return Field(
        default=None,
        min_length=1,
        max_length=len(WARNING_CODES),
        description="With audit.warned: send it only for an audit that warns with one of these codes (e.g. "
        '["training_fit", "output_order"]: a deployed model fed inputs it never saw), not for every warned audit. '
        "Null or left out: every one.",
    )


def known_codes(codes: list[str] | None) -> list[str] | None:
    """``codes`` in the table's order, once each; a ``ValueError`` naming any code that is not a warning code."""
    if codes is None:
        return None
    unknown = [c for c in codes if c not in WARNING_CODES]
    if unknown:
        named = ", ".join(map(repr, unknown))
        raise ValueError(f"unknown warning code(s) {named}; valid: {', '.join(WARNING_CODES)}")
    return [c for c in WARNING_CODES if c in codes]


def check_filter(events: list[str], codes: list[str] | None) -> None:
    """A ``ValueError`` where warning codes filter an event the subscription does not take."""
    if codes is not None and "audit.warned" not in events:
        raise ValueError("warning_codes filters the audit.warned event: subscribe to it too, or leave them out")


class WebhookCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2000, description="An http(s) URL without credentials.")
    events: list[WebhookEvent] = Field(min_length=1, max_length=4)
    warning_codes: list[str] | None = _warning_codes()

    _known_codes = field_validator("warning_codes")(known_codes)

    @model_validator(mode="after")
    def _filters_warned(self) -> WebhookCreate:
        check_filter(list(self.events), self.warning_codes)
        return self


class WebhookUpdate(BaseModel):
    """What ``PATCH /v1/webhooks/{id}`` changes: the events, the warning codes (``null`` lifts the filter); a key
    left out keeps its value. The URL and the secret stay (subscribe again for another URL)."""

    model_config = ConfigDict(extra="forbid")

    events: list[WebhookEvent] | None = Field(default=None, min_length=1, max_length=4)
    warning_codes: list[str] | None = _warning_codes()

    _known_codes = field_validator("warning_codes")(known_codes)


class WebhookRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    url: str
    events: list[WebhookEvent]
    warning_codes: list[str] | None = None
    """``audit.warned`` is sent only for an audit with one of these codes (null: for every warned audit)."""
    created_at: datetime


class WebhookCreated(WebhookRead):
    secret: str
    """``whsec_`` + base64: verifies the deliveries' signatures. Shown only in this answer."""


class RotateRequest(BaseModel):
    """``POST /v1/webhooks/{id}/rotate-secret``: how long the secret being replaced keeps signing."""

    model_config = ConfigDict(extra="forbid")

    overlap_seconds: int = Field(
        default=86400,
        ge=0,
        le=7 * 24 * 3600,
        description="Seconds the old secret keeps signing every delivery beside the new one (both signatures in "
        "webhook-signature), so the receiver can switch without refusing any; 0: it stops at once (a leaked "
        "secret). At most 7 days; default 1 day.",
    )


class SecretRotated(BaseModel):
    id: uuid.UUID
    secret: str
    """The new ``whsec_`` secret: every delivery is signed with it from now on. Shown only in this answer."""
    previous_secret_expires_at: datetime | None
    """Until when the replaced secret also signs (null: it stopped at once)."""


class WebhookPage(BaseModel):
    items: list[WebhookRead]
    next_page_token: str | None = None


class DeliveryRead(BaseModel):
    """One event sent (or being sent) to the subscription. ``id`` is the ``webhook-id`` header."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    event: WebhookEvent | Literal["webhook.ping"]
    """The event; ``webhook.ping`` for a test event an admin sent (``POST /v1/webhooks/{id}/ping``)."""
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
    next_page_token: str | None = None


class RecoverRequest(BaseModel):
    """``POST /v1/webhooks/{id}/recover``: which failed deliveries to send again."""

    model_config = ConfigDict(extra="forbid")

    since: AwareDatetime | None = Field(
        default=None,
        description="Only deliveries created at or after this time (with a time zone, e.g. the start of the "
        "receiver's outage); left out: every failed one.",
    )


class RecoverResult(BaseModel):
    webhook_id: uuid.UUID
    resent: int
    """Failed deliveries sent again now (the oldest first, at most 1000)."""
    remaining: int
    """Failed deliveries still left (beyond the 1000): call again."""
