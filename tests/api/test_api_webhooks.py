"""``/v1/webhooks`` and the receivers' signature helper ``app.webhook_verify``."""

from __future__ import annotations

import base64
import time

import pytest
from apihelp import assert_problem, fields
from fastapi.testclient import TestClient

from app.webhook_verify import WebhookVerificationError, sign, verify


def test_subscribe_list_delete(client: TestClient, auth: dict[str, str], other_auth: dict[str, str]) -> None:
    body = {"url": "https://hooks.example.com/bind", "events": ["audit.succeeded", "schedule.threshold_exceeded"]}
    created = client.post("/v1/webhooks", headers=auth, json=body)
    assert created.status_code == 201, created.text
    hook = created.json()
    assert hook["secret"].startswith("whsec_") and len(base64.b64decode(hook["secret"][6:])) == 32
    read = client.get(f"/v1/webhooks/{hook['id']}", headers=auth).json()
    assert "secret" not in read and read["events"] == sorted(body["events"])
    assert [h["id"] for h in client.get("/v1/webhooks", headers=auth).json()["items"]] == [hook["id"]]
    assert client.get(f"/v1/webhooks/{hook['id']}/deliveries", headers=auth).json()["items"] == []
    assert_problem(client.get(f"/v1/webhooks/{hook['id']}", headers=other_auth), 404, "webhook-not-found")
    assert client.delete(f"/v1/webhooks/{hook['id']}", headers=auth).status_code == 204


@pytest.mark.parametrize(
    "url", ["ftp://example.com/x", "https://user:pw@example.com/x", "https://@/x", "javascript:alert(1)", "x"]
)
def test_only_plain_http_urls(client: TestClient, auth: dict[str, str], url: str) -> None:
    response = client.post("/v1/webhooks", headers=auth, json={"url": url, "events": ["audit.failed"]})
    assert fields(assert_problem(response, 422)) == {"url"}


def test_unknown_event_is_422(client: TestClient, auth: dict[str, str]) -> None:
    response = client.post("/v1/webhooks", headers=auth, json={"url": "http://x.test/", "events": ["audit.started"]})
    assert_problem(response, 422)


def test_verify_accepts_the_signed_body_only() -> None:
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    body, now = b'{"type":"audit.succeeded"}', int(time.time())
    headers = {
        "Webhook-Id": "msg_1",
        "Webhook-Timestamp": str(now),
        "Webhook-Signature": sign("msg_1", now, body, secret),
    }
    assert verify(body, headers, secret) == {"type": "audit.succeeded"}
    assert verify(body, {**headers, "Webhook-Signature": "v1,bad " + headers["Webhook-Signature"]}, secret)
    for bad in (
        {**headers, "Webhook-Id": "msg_2"},
        {**headers, "Webhook-Timestamp": str(now - 3600)},
        {k: v for k, v in headers.items() if k != "Webhook-Signature"},
    ):
        with pytest.raises(WebhookVerificationError):
            verify(body, bad, secret)
    with pytest.raises(WebhookVerificationError):
        verify(body + b" ", headers, secret)
    with pytest.raises(WebhookVerificationError):
        verify(body, headers, "whsec_" + base64.b64encode(b"x" * 32).decode())
