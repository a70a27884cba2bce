"""The console's signed cookies: a session after sign-in, a short-lived one that carries the sign-in form's
CSRF token before there is a session, and one that carries a new webhook signing secret across a redirect to the
page that shows it once.

A cookie's value is ``<payload>.<signature>``: the payload is URL-safe base64 of a small JSON document holding an
expiry (``exp``, Unix seconds) and a random CSRF token (``csrf``); the signature is HMAC-SHA256 of the cookie's
purpose and the payload under ``BIND_CONSOLE_SECRET``. A value that is malformed, signed with another key or for
another purpose, or expired reads as no cookie. The session names the stored API key (``kid``), not the key
itself: revoking the key ends the session at its next request.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

SESSION_COOKIE = "bind_console"
SIGN_IN_COOKIE = "bind_console_sign_in"
COOKIE_PATH = "/console"
SIGN_IN_SECONDS = 15 * 60
"""How long the sign-in form may be left open before its token is refused."""
SHOWN_COOKIE = "bind_console_shown"
SHOWN_PATH = "/console/webhooks"
SHOWN_SECONDS = 60
"""How long a secret waits for the page that shows it once, after the form that made it redirected there."""


@dataclass(frozen=True)
class ConsoleSession:
    """A signed-in console user: the stored API key they signed in with and the session's CSRF token."""

    key_id: uuid.UUID
    csrf: str
    expires: int


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _sign(secret: str, purpose: str, payload: str) -> str:
    mac = hmac.new(secret.encode(), f"{purpose}.{payload}".encode(), hashlib.sha256)
    return _b64(mac.digest())


def sign(secret: str, purpose: str, doc: dict[str, Any]) -> str:
    """``doc`` as a cookie value signed for ``purpose``."""
    payload = _b64(json.dumps(doc, separators=(",", ":"), sort_keys=True).encode())
    return f"{payload}.{_sign(secret, purpose, payload)}"


def unsign(secret: str, purpose: str, value: str | None, *, now: float | None = None) -> dict[str, Any] | None:
    """The document inside a cookie value signed for ``purpose`` and not expired; ``None`` for anything else."""
    if not value or value.count(".") != 1 or len(value) > 4096:
        return None
    payload, signature = value.split(".")
    if not hmac.compare_digest(signature, _sign(secret, purpose, payload)):
        return None
    try:
        doc = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    found: dict[str, Any] = doc
    expires = found.get("exp")
    if not isinstance(expires, int) or isinstance(expires, bool) or expires <= (now or time.time()):
        return None
    return found


def new_session(secret: str, key_id: uuid.UUID, seconds: int) -> tuple[str, ConsoleSession]:
    """A fresh session for the stored key ``key_id``: the cookie value and what it holds."""
    session = ConsoleSession(key_id=key_id, csrf=secrets.token_urlsafe(32), expires=int(time.time()) + seconds)
    value = sign(secret, SESSION_COOKIE, {"kid": str(key_id), "csrf": session.csrf, "exp": session.expires})
    return value, session


def read_session(secret: str, value: str | None) -> ConsoleSession | None:
    """The session a cookie value holds, or ``None`` (absent, forged, expired or malformed)."""
    doc = unsign(secret, SESSION_COOKIE, value)
    if doc is None or not isinstance(doc.get("csrf"), str) or not isinstance(doc.get("kid"), str):
        return None
    try:
        key_id = uuid.UUID(doc["kid"])
    except ValueError:
        return None
    return ConsoleSession(key_id=key_id, csrf=doc["csrf"], expires=doc["exp"])


def new_sign_in(secret: str) -> tuple[str, str]:
    """The sign-in form's cookie value and the CSRF token the form must send back with it."""
    token = secrets.token_urlsafe(32)
    return sign(secret, SIGN_IN_COOKIE, {"csrf": token, "exp": int(time.time()) + SIGN_IN_SECONDS}), token


def sign_in_token(secret: str, value: str | None) -> str | None:
    """The CSRF token of the sign-in cookie, or ``None``."""
    doc = unsign(secret, SIGN_IN_COOKIE, value)
    token = doc.get("csrf") if doc else None
    return token if isinstance(token, str) else None


def shown_once(secret: str, key_id: uuid.UUID, doc: dict[str, Any]) -> str:
    """A cookie value carrying ``doc`` (a new signing secret, with what the page says of it) across the redirect
    after the form that made it, for the session of ``key_id`` only: the page it lands on shows it and clears it, so
    reloading that page neither sends the form again nor shows the secret twice."""
    return sign(secret, SHOWN_COOKIE, {"kid": str(key_id), "shown": doc, "exp": int(time.time()) + SHOWN_SECONDS})


def read_shown(secret: str, key_id: uuid.UUID, value: str | None) -> dict[str, Any] | None:
    """What :func:`shown_once` carries, for this session's key; ``None`` for anything else."""
    doc = unsign(secret, SHOWN_COOKIE, value)
    if doc is None or doc.get("kid") != str(key_id) or not isinstance(doc.get("shown"), dict):
        return None
    shown: dict[str, Any] = doc["shown"]
    return shown


def same_token(expected: str | None, given: str | None) -> bool:
    """Whether a form's CSRF token matches the one its cookie carries (constant time; absent never matches)."""
    return bool(expected) and bool(given) and hmac.compare_digest(str(expected), str(given))
