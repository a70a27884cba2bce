"""The audit trail as the API shows it (``/v1/events``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict


class EventRead(BaseModel):
    """One trail entry. ``target`` is the resource's path under ``/v1``; an erased resource's entries keep only it."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    created_at: datetime
    actor: Literal["key", "cli", "system"]
    """``key``: an API key (through the API or the console); ``cli``: ``bind-audit keys``; ``system``: retention."""
    actor_key_id: uuid.UUID | None
    action: str
    target: str | None
    request_id: str | None
    outcome: Literal["succeeded", "denied", "failed"]
    status: int | None
    """The HTTP status answered (null outside a request)."""


class EventPage(BaseModel):
    items: list[EventRead]
    next_page_token: str | None = None
