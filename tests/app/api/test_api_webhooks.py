"""``/v1/webhooks`` and the receivers' signature helper ``app.webhooks.signing``."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable

import pytest
from apihelp import assert_problem, fields
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.session import now
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


def test_warning_codes_filter_audit_warned(client: TestClient, auth: dict[str, str]) -> None:
    """A subscription may take ``audit.warned`` only for some codes: unknown codes and codes without that event are
    422s naming the field; the codes are kept in the table's order, once each."""
    body = {"url": "https://hooks.example.com/drift", "events": ["audit.warned"]}
    created = client.post("/v1/webhooks", headers=auth, json={**body, "warning_codes": ["training_fit", "output_order",
                                                                                        "training_fit"]})  # fmt: skip
    assert created.status_code == 201, created.text
    assert created.json()["warning_codes"] == ["output_order", "training_fit"]
    assert client.get(f"/v1/webhooks/{created.json()['id']}", headers=auth).json()["warning_codes"] == [
        "output_order",
        "training_fit",
    ]
    plain = client.post("/v1/webhooks", headers=auth, json=body).json()
    assert plain["warning_codes"] is None
    unknown = assert_problem(client.post("/v1/webhooks", headers=auth, json={**body, "warning_codes": ["fit"]}), 422)
    assert fields(unknown) == {"warning_codes"} and "training_fit" in unknown["errors"][0]["message"]
    other = {"url": body["url"], "events": ["audit.failed"], "warning_codes": ["training_fit"]}
    assert "audit.warned" in assert_problem(client.post("/v1/webhooks", headers=auth, json=other), 422)["detail"]
    empty = client.post("/v1/webhooks", headers=auth, json={**body, "warning_codes": []})
    assert fields(assert_problem(empty, 422)) == {"warning_codes"}


def test_a_subscription_changes_its_events_and_codes_and_keeps_its_secret(
    client: TestClient, auth: dict[str, str], other_auth: dict[str, str]
) -> None:
    """``PATCH``: the keys given change (``warning_codes: null`` lifts the filter), the others stay; the URL and the
    secret stay; a filter without ``audit.warned`` and null events are 422s naming the field."""
    body = {"url": "https://hooks.example.com/p", "events": ["audit.warned", "audit.failed"]}
    hook = client.post("/v1/webhooks", headers=auth, json=body).json()
    path = f"/v1/webhooks/{hook['id']}"
    narrowed = client.patch(path, headers=auth, json={"warning_codes": ["unseen_categories", "training_fit"]})
    assert narrowed.status_code == 200, narrowed.text
    assert narrowed.json()["warning_codes"] == ["training_fit", "unseen_categories"]
    assert narrowed.json()["events"] == ["audit.failed", "audit.warned"] and "secret" not in narrowed.json()
    refused = client.patch(path, headers=auth, json={"events": ["audit.failed"]})  # the codes would filter nothing
    assert fields(assert_problem(refused, 422)) == {"warning_codes"}
    assert fields(assert_problem(client.patch(path, headers=auth, json={"events": None}), 422)) == {"events"}
    assert fields(assert_problem(client.patch(path, headers=auth, json={"url": "https://x.test/"}), 422)) == {"url"}
    both = client.patch(path, headers=auth, json={"events": ["audit.failed"], "warning_codes": None}).json()
    assert (both["events"], both["warning_codes"]) == (["audit.failed"], None)
    assert client.get(path, headers=auth).json() == both
    assert_problem(client.patch(path, headers=other_auth, json={"warning_codes": None}), 404, "webhook-not-found")


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


def test_a_run_without_a_verdict_says_so_in_its_events(sessions: sessionmaker[Session]) -> None:
    """``audit.succeeded`` and ``schedule.threshold_exceeded`` carry ``withheld``: a receiver tells a breach on a run
    whose model no longer fits its inputs (figures as measured) from a finding."""
    from app.core.db.tables import Audit, Schedule, Tenant, Webhook, WebhookDelivery
    from app.webhooks.events import audit_finished

    with sessions.begin() as session:
        tenant = Tenant(name="withheld")
        session.add(tenant)
        session.flush()
        schedule = Schedule(tenant_id=tenant.id, dataset="synthetic", settings={}, config={}, interval_seconds=3600,
                            thresholds={"delta_sp": 0.1}, next_run_at=now())  # fmt: skip
        hook = Webhook(tenant_id=tenant.id, url="https://example.org/h", secret="s",
                       events=["audit.succeeded", "schedule.threshold_exceeded"])  # fmt: skip
        session.add_all([schedule, hook])
        session.flush()
        ids = []
        for why in ("the model no longer fits", None):
            results = {"metrics": {"test": {"delta_sp": 0.3}}, "summary": {"withheld": why}}
            audit = Audit(tenant_id=tenant.id, dataset="synthetic", config={}, request_hash="0" * 64,
                          state="succeeded", results=results, schedule_id=schedule.id)  # fmt: skip
            session.add(audit)
            session.flush()
            ids.append(audit_finished(session, audit.id))
        sent = {
            d.id: d.payload
            for d in session.scalars(select(WebhookDelivery).where(WebhookDelivery.webhook_id == hook.id))
        }
        said = [{sent[i]["type"]: sent[i]["data"]["withheld"] for i in one} for one in ids]
        assert said == [
            {"audit.succeeded": "the model no longer fits", "schedule.threshold_exceeded": "the model no longer fits"},
            {"audit.succeeded": None, "schedule.threshold_exceeded": None},
        ]
        session.delete(tenant)
