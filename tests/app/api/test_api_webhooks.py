"""``/v1/webhooks`` and the receivers' signature helper ``app.webhooks.signing``."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable

import pytest
from apihelp import assert_problem, fields
from fastapi.testclient import TestClient

from app.core.settings import Settings
from app.main import create_app
from app.webhooks.signing import WebhookVerificationError, sign, verify


def test_subscribe_list_delete(client: TestClient, auth: dict[str, str], other_auth: dict[str, str]) -> None:
    events = ["audit.succeeded", "schedule.threshold_exceeded", "audit.warned", "audit.failed"]  # every event
    body = {"url": "https://hooks.example.com/bind", "events": events}
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


PRIVATE_URLS = [
    "http://127.0.0.1:9000/hook", "http://localhost/hook", "http://[::1]/hook", "http://2130706433/hook",
    "http://10.0.0.5/hook", "http://192.168.1.1/hook", "http://169.254.169.254/latest/meta-data",
    "https://[fe80::1]/hook", "http://224.0.0.1/hook", "http://0.0.0.0/hook", "http://[::ffff:10.0.0.1]/hook",
    "http://100.64.0.1/hook", "http://240.0.0.1/hook",
]  # fmt: skip


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_private_destinations_are_refused(client: TestClient, auth: dict[str, str], url: str) -> None:
    """Server-side request forgery: a host that is, or resolves to, a non-global address is a 422 (the
    test settings leave BIND_WEBHOOK_ALLOW_PRIVATE at its default, off)."""
    response = client.post("/v1/webhooks", headers=auth, json={"url": url, "events": ["audit.failed"]})
    problem = assert_problem(response, 422, "validation-error")
    assert fields(problem) == {"url"} and "BIND_WEBHOOK_ALLOW_PRIVATE" in problem["detail"]
    assert client.get("/v1/webhooks", headers=auth).json()["items"] == []


def test_public_or_unresolvable_hosts_are_accepted(client: TestClient, auth: dict[str, str]) -> None:
    """A global address is fine; a name that does not resolve now is checked again at each delivery."""
    for url in ("https://8.8.8.8/hook", "https://hooks.invalid/hook"):
        response = client.post("/v1/webhooks", headers=auth, json={"url": url, "events": ["audit.failed"]})
        assert response.status_code == 201, response.text


def test_private_destinations_allowed_by_the_setting(settings: Settings, new_key: Callable[[], dict[str, str]]) -> None:
    with TestClient(create_app(settings.model_copy(update={"webhook_allow_private": True}))) as allowing:
        body = {"url": "http://127.0.0.1:9000/hook", "events": ["audit.failed"]}
        assert allowing.post("/v1/webhooks", headers=new_key(), json=body).status_code == 201
