"""Signing and verifying webhook deliveries (Standard Webhooks, https://www.standardwebhooks.com).

Standard library only, so a receiver can copy this file. Each delivery carries three headers:

* ``webhook-id``: the message id (the same on every retry of one delivery: use it to drop duplicates);
* ``webhook-timestamp``: Unix seconds when this attempt was sent;
* ``webhook-signature``: ``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`` keyed with the
  base64-decoded part of the subscription's secret after ``whsec_`` (several space-separated signatures
  may appear; one match is enough).

Receiver::

    from app.webhooks.signing import WebhookVerificationError, verify
    try:
        event = verify(request_body_bytes, request_headers, "whsec_...")
    except WebhookVerificationError:
        return 400
    # event == {"type": "audit.succeeded", "timestamp": "...", "data": {...}}
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

SECRET_PREFIX = "whsec_"
TOLERANCE_SECONDS = 300


class WebhookVerificationError(ValueError):
    """The delivery is not signed with this secret, or its timestamp is too far from now."""


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def sign(msg_id: str, timestamp: int, body: bytes | str, secret: str) -> str:
    """The ``webhook-signature`` header value for one attempt."""
    raw = body.encode() if isinstance(body, str) else body
    digest = hmac.new(_key(secret), f"{msg_id}.{timestamp}.".encode() + raw, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(msg_id: str, timestamp: int, body: bytes | str, secret: str, *also: str) -> str:
    """The ``webhook-signature`` header signed with ``secret`` and with each secret of ``also`` (a rotated secret
    still in its overlap), space-separated: a receiver that checks any one of them accepts the delivery."""
    return " ".join(sign(msg_id, timestamp, body, s) for s in (secret, *also))


def verify(
    payload: bytes | str, headers: Mapping[str, str], secret: str, *, tolerance: int = TOLERANCE_SECONDS
) -> dict[str, Any]:
    """Check a delivery's signature and timestamp; return its JSON body.

    Args:
        payload: the request body exactly as received (before any JSON parsing).
        headers: the request headers (any case).
        secret: the subscription's ``whsec_...`` secret.
        tolerance: largest accepted distance, in seconds, between ``webhook-timestamp`` and now (replays).

    Raises:
        WebhookVerificationError: a header is missing, the timestamp is out of tolerance, or no signature
            matches.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        msg_id, stamp, signatures = lower["webhook-id"], lower["webhook-timestamp"], lower["webhook-signature"]
        timestamp = int(stamp)
    except (KeyError, ValueError) as exc:
        raise WebhookVerificationError("missing or malformed webhook headers") from exc
    if abs(time.time() - timestamp) > tolerance:
        raise WebhookVerificationError("timestamp outside the tolerance")
    expected = sign(msg_id, timestamp, payload, secret)
    if not any(hmac.compare_digest(expected, s) for s in signatures.split()):
        raise WebhookVerificationError("no matching signature")
    result: dict[str, Any] = json.loads(payload)
    return result
