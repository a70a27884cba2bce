"""API keys as ``/v1/keys`` shows them: never the key itself, except once when it is made."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

RoleName = Literal["viewer", "auditor", "admin"]


class KeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: RoleName
    """What the key may do: ``viewer`` reads, ``auditor`` also uploads, starts, cancels and schedules, ``admin``
    also manages keys and webhooks, deletes and reads the trail."""


class KeyRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    prefix: str
    """The key's first characters (``bind_`` and 8 more), to tell keys apart."""
    role: RoleName
    created_at: datetime
    revoked_at: datetime | None


class KeyCreated(KeyRead):
    key: str
    """The key itself; it is not stored and is shown only in this answer."""


class KeyList(BaseModel):
    items: list[KeyRead]
