"""Opaque cursor tokens for keyset pagination: URL-safe base64 of a small JSON document."""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Select, tuple_
from sqlalchemy.orm import Session

from app.db.models import Audit, Graph, Schedule, SuppliedModel, Webhook
from app.errors import BadRequest

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def encode_token(kind: str, key: list[Any]) -> str:
    """A token resuming after ``key`` (the sort key of the last item of a page) in a listing of ``kind``."""
    raw = json.dumps({"k": kind, "v": key}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str, kind: str, arity: int) -> list[Any]:
    """The sort key inside ``token``; 400 problem if it is malformed or from another listing."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        doc = json.loads(raw)
        key = doc["v"]
        ok = doc["k"] == kind and isinstance(key, list) and len(key) == arity
    except (binascii.Error, ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise BadRequest(
            "page_token is not a token this listing issued.",
            slug="invalid-page-token",
            title="Invalid page token",
            errors=[{"field": "page_token", "message": "malformed or from another listing"}],
        )
    return list(key)


M = TypeVar("M", Graph, Audit, SuppliedModel, Schedule, Webhook)


def newest_first(
    session: Session, stmt: Select[M], model: type[M], *, kind: str, limit: int, token: str | None
) -> tuple[list[M], str | None]:
    """One page of ``stmt``'s rows, newest first, keyed on ``(created_at, id)``: stable and O(limit)."""
    if token is not None:
        created_s, id_s = decode_token(token, kind, 2)
        try:
            after = (datetime.fromisoformat(created_s), uuid.UUID(id_s))
        except (TypeError, ValueError):
            decode_token("", kind, 2)  # raises the invalid-token problem
            raise
        stmt = stmt.where(tuple_(model.created_at, model.id) < tuple_(*after))
    stmt = stmt.order_by(model.created_at.desc(), model.id.desc()).limit(limit + 1)
    rows = list(session.scalars(stmt))
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    return rows[:limit], encode_token(kind, [last.created_at.isoformat(), str(last.id)])
