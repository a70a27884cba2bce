"""Opaque cursor tokens for keyset pagination: URL-safe base64 of a small JSON document."""

from __future__ import annotations

import base64
import binascii
import json
import math
import uuid
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import Select, tuple_
from sqlalchemy.orm import Session

from app.core.db.tables import (
    Audit,
    Graph,
    Schedule,
    SuppliedModel,
    TrailEvent,
    VersionOutputs,
    Webhook,
    WebhookDelivery,
    WhatIf,
)
from app.core.errors import BadRequest

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def encode_token(kind: str, key: list[Any]) -> str:
    """A token resuming after ``key`` (the sort key of the last item of a page) in a listing of ``kind``."""
    raw = json.dumps({"k": kind, "v": key}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def invalid_token() -> BadRequest:
    """The 400 ``invalid-page-token`` problem: a token this listing did not issue, or a forged one."""
    return BadRequest(
        "page_token is not a token this listing issued.",
        slug="invalid-page-token",
        title="Invalid page token",
        errors=[{"field": "page_token", "message": "malformed or from another listing"}],
    )


def decode_token(token: str, kind: str, arity: int) -> list[Any]:
    """The sort key inside ``token``; 400 problem if it is malformed or from another listing."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        doc = json.loads(raw)
        key = doc["v"]
        ok = doc["k"] == kind and isinstance(key, list) and len(key) == arity
    except (binascii.Error, ValueError, KeyError, TypeError, RecursionError):
        ok = False
    if not ok:
        raise invalid_token()
    return list(key)


def int64_part(value: Any) -> int:
    """``value`` as a key part bound for an integer column: a JSON integer (not a boolean) within int64.

    A forged token could otherwise carry ``2**70``, which the database refuses with an error (a 500).

    Raises:
        BadRequest: the 400 ``invalid-page-token`` problem.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not INT64_MIN <= value <= INT64_MAX:
        raise invalid_token()
    return value


def float_part(value: Any) -> float:
    """``value`` as a key part bound for a float column: a finite JSON number (not a boolean, not NaN).

    Raises:
        BadRequest: the 400 ``invalid-page-token`` problem.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid_token()
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the float range
        raise invalid_token() from None
    if not math.isfinite(number):
        raise invalid_token()
    return number


def timestamp_part(value: Any) -> datetime:
    """``value`` as a key part bound for a timestamp column: an ISO 8601 string with a zone, in UTC's range.

    Raises:
        BadRequest: the 400 ``invalid-page-token`` problem (a naive or unrepresentable time included).
    """
    if not isinstance(value, str):
        raise invalid_token()
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            raise ValueError("naive")
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise invalid_token() from None


def uuid_part(value: Any) -> uuid.UUID:
    """``value`` as a key part bound for a UUID column.

    Raises:
        BadRequest: the 400 ``invalid-page-token`` problem.
    """
    if not isinstance(value, str):
        raise invalid_token()
    try:
        return uuid.UUID(value)
    except ValueError:
        raise invalid_token() from None


M = TypeVar("M", Graph, Audit, SuppliedModel, VersionOutputs, Schedule, Webhook, WebhookDelivery, TrailEvent, WhatIf)


def newest_first(
    session: Session, stmt: Select[M], model: type[M], *, kind: str, limit: int, token: str | None
) -> tuple[list[M], str | None]:
    """One page of ``stmt``'s rows, newest first, keyed on ``(created_at, id)``: stable and O(limit)."""
    if token is not None:
        created_s, id_s = decode_token(token, kind, 2)
        after = (timestamp_part(created_s), uuid_part(id_s))
        stmt = stmt.where(tuple_(model.created_at, model.id) < tuple_(*after))
    stmt = stmt.order_by(model.created_at.desc(), model.id.desc()).limit(limit + 1)
    rows = list(session.scalars(stmt))
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    return rows[:limit], encode_token(kind, [last.created_at.isoformat(), str(last.id)])
