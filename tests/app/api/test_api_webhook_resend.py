"""A test event and a delivery sent again, on an admin's request: ``POST /v1/webhooks/{id}/ping`` and
``POST …/deliveries/{id}/redeliver`` write (or reset) a pending delivery, send its task to the broker after the
commit, and are read back at ``GET …/deliveries/{id}``; each in the trail. (Signed and received end to end by real
workers: tests/integration/test_schedules.py.)"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import redis
from apihelp import assert_problem
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Webhook, WebhookDelivery
from app.webhooks import resend

HOOK = {"url": "https://8.8.8.8/hook", "events": ["audit.warned"], "warning_codes": ["training_fit"]}


def _queued(redis_client: redis.Redis, delivery_id: str) -> int:
    """How many delivery tasks for ``delivery_id`` wait on the broker's default queue."""
    messages = [json.loads(m) for m in redis_client.lrange("celery", 0, -1)]  # type: ignore[union-attr]
    return sum(
        m["headers"]["task"] == "bind.deliver_webhook" and delivery_id in m["headers"]["argsrepr"] for m in messages
    )


def test_ping_then_send_again(
    client: TestClient,
    new_key: Callable[[], dict[str, str]],
    redis_client: redis.Redis,
    sessions: sessionmaker[Session],
) -> None:
    admin = new_key()
    hook = client.post("/v1/webhooks", headers=admin, json=HOOK).json()
    pinged = client.post(f"/v1/webhooks/{hook['id']}/ping", headers=admin)
    assert pinged.status_code == 202, pinged.text
    sent = pinged.json()
    assert pinged.headers["location"] == f"/v1/webhooks/{hook['id']}/deliveries/{sent['id']}"
    assert (sent["event"], sent["state"], sent["attempts"]) == ("webhook.ping", "pending", 0)
    data = sent["payload"]["data"]
    assert sent["payload"]["type"] == "webhook.ping"
    assert (data["webhook_id"], data["events"], data["warning_codes"]) == (
        hook["id"],
        ["audit.warned"],
        ["training_fit"],
    )
    assert _queued(redis_client, sent["id"]) == 1  # sent to the workers after the commit
    read = client.get(pinged.headers["location"], headers=admin).json()
    assert read == sent
    log = client.get(f"/v1/webhooks/{hook['id']}/deliveries", headers=admin).json()["items"]
    assert [d["id"] for d in log] == [sent["id"]]
    # still being sent: refused, nothing queued again
    again = f"/v1/webhooks/{hook['id']}/deliveries/{sent['id']}/redeliver"
    assert_problem(client.post(again, headers=admin), 409, "delivery-pending")
    # failed after its retries (the receiver was down): sent again, the same id, attempts from 0
    with sessions.begin() as session:
        session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id == uuid.UUID(sent["id"]))
            .values(state="failed", attempts=8, response_status=503, last_error="HTTP 503", next_attempt_at=None)
        )
    resent = client.post(again, headers=admin)
    assert resent.status_code == 202, resent.text
    body = resent.json()
    assert (body["id"], body["state"], body["attempts"], body["payload"]) == (sent["id"], "pending", 0, sent["payload"])
    assert body["last_error"] == "HTTP 503"  # what the last attempt met, until the next one
    assert _queued(redis_client, sent["id"]) == 2
    events = client.get("/v1/events", headers=admin).json()["items"]
    done = [
        (e["action"], e["target"], e["status"]) for e in events if e["action"] in ("webhook.ping", "webhook.redeliver")
    ]
    assert sorted(done) == sorted(
        [
            ("webhook.ping", f"/webhooks/{hook['id']}", 202),
            ("webhook.redeliver", f"/webhooks/{hook['id']}/deliveries/{sent['id']}", 409),
            ("webhook.redeliver", f"/webhooks/{hook['id']}/deliveries/{sent['id']}", 202),
        ]
    )


def test_another_tenants_or_an_unknown_delivery_is_not_found(
    client: TestClient, new_key: Callable[[], dict[str, str]]
) -> None:
    admin, other = new_key(), new_key()
    hook = client.post("/v1/webhooks", headers=admin, json=HOOK).json()
    second = client.post("/v1/webhooks", headers=admin, json=HOOK).json()
    sent = client.post(f"/v1/webhooks/{hook['id']}/ping", headers=admin).json()
    assert_problem(client.post(f"/v1/webhooks/{hook['id']}/ping", headers=other), 404, "webhook-not-found")
    assert_problem(
        client.get(f"/v1/webhooks/{hook['id']}/deliveries/{sent['id']}", headers=other), 404, "webhook-not-found"
    )
    # a delivery is found under its own webhook only
    assert_problem(
        client.get(f"/v1/webhooks/{second['id']}/deliveries/{sent['id']}", headers=admin), 404, "delivery-not-found"
    )
    unknown = f"/v1/webhooks/{hook['id']}/deliveries/{uuid.uuid4()}/redeliver"
    assert_problem(client.post(unknown, headers=admin), 404, "delivery-not-found")


def test_failed_deliveries_listed_a_page_at_a_time_and_recovered_in_one_call(
    client: TestClient,
    new_key: Callable[[], dict[str, str]],
    redis_client: redis.Redis,
    sessions: sessionmaker[Session],
) -> None:
    """After a receiver's outage: ``?state=failed`` lists what failed, page by page; ``recover`` sends them again
    (``since``: only those from the outage on), oldest first; a pending or succeeded one is left as it is."""
    admin = new_key()
    hook = client.post("/v1/webhooks", headers=admin, json=HOOK).json()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with sessions.begin() as session:
        rows = [
            WebhookDelivery(webhook_id=uuid.UUID(hook["id"]), event="audit.warned", payload={"type": "audit.warned"},
                            state=state, attempts=8 if state == "failed" else 1, created_at=start + timedelta(hours=i))
            for i, state in enumerate(["failed", "succeeded", "failed", "failed", "pending", "failed"])
        ]  # fmt: skip
        session.add_all(rows)
        session.flush()
        ids = [str(r.id) for r in rows]
    url = f"/v1/webhooks/{hook['id']}/deliveries"
    first = client.get(url, headers=admin, params={"state": "failed", "limit": 3}).json()
    assert [d["id"] for d in first["items"]] == [ids[5], ids[3], ids[2]]  # newest first
    rest = client.get(
        url, headers=admin, params={"state": "failed", "limit": 3, "page_token": first["next_page_token"]}
    )
    assert [d["id"] for d in rest.json()["items"]] == [ids[0]] and rest.json()["next_page_token"] is None
    assert_problem(client.get(url, headers=admin, params={"page_token": "nope"}), 400, "invalid-page-token")
    assert client.get(url, headers=admin, params={"state": "lost"}).status_code == 422
    since = (start + timedelta(hours=2)).isoformat()
    recovered = client.post(f"/v1/webhooks/{hook['id']}/recover", headers=admin, json={"since": since})
    assert recovered.status_code == 202, recovered.text
    assert recovered.json() == {"webhook_id": hook["id"], "resent": 3, "remaining": 0}
    states = {d["id"]: (d["state"], d["attempts"]) for d in client.get(url, headers=admin).json()["items"]}
    assert [states[i] for i in ids] == [
        ("failed", 8), ("succeeded", 1), ("pending", 0), ("pending", 0), ("pending", 1), ("pending", 0)
    ]  # fmt: skip
    assert all(_queued(redis_client, i) == 1 for i in (ids[2], ids[3], ids[5])) and _queued(redis_client, ids[0]) == 0
    everything = client.post(f"/v1/webhooks/{hook['id']}/recover", headers=admin, json={})
    assert everything.json()["resent"] == 1  # the one before "since"
    naive = client.post(f"/v1/webhooks/{hook['id']}/recover", headers=admin, json={"since": "2026-01-01T00:00:00"})
    assert naive.status_code == 422  # a time without a zone is refused, not guessed


def test_recover_sends_at_most_its_limit_and_counts_the_rest(
    client: TestClient,
    new_key: Callable[[], dict[str, str]],
    sessions: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(resend, "RECOVER_LIMIT", 2)
    admin = new_key()
    hook = client.post("/v1/webhooks", headers=admin, json=HOOK).json()
    with sessions.begin() as session:
        session.add_all(
            WebhookDelivery(webhook_id=uuid.UUID(hook["id"]), event="audit.warned", payload={}, state="failed")
            for _ in range(5)
        )
    said = [client.post(f"/v1/webhooks/{hook['id']}/recover", headers=admin, json={}).json() for _ in range(4)]
    assert [(s["resent"], s["remaining"]) for s in said] == [(2, 3), (2, 1), (1, 0), (0, 0)]


def test_rotate_the_signing_secret_with_an_overlap(
    client: TestClient, new_key: Callable[[], dict[str, str]], sessions: sessionmaker[Session]
) -> None:
    """A new secret, shown once; the old one kept to sign beside it until the overlap ends (none: dropped at once);
    URL, events and log stay; the trail records it."""
    admin = new_key()
    hook = client.post("/v1/webhooks", headers=admin, json=HOOK).json()
    client.post(f"/v1/webhooks/{hook['id']}/ping", headers=admin)
    before = datetime.now(UTC)
    rotated = client.post(f"/v1/webhooks/{hook['id']}/rotate-secret", headers=admin, json={"overlap_seconds": 3600})
    assert rotated.status_code == 200, rotated.text
    body = rotated.json()
    assert body["secret"].startswith("whsec_") and body["secret"] != hook["secret"]
    until = datetime.fromisoformat(body["previous_secret_expires_at"])
    assert timedelta(seconds=3590) < until - before < timedelta(seconds=3610)
    with sessions() as session:
        row = session.get(Webhook, uuid.UUID(hook["id"]))
        assert row is not None and (row.secret, row.previous_secret) == (body["secret"], hook["secret"])
    assert "secret" not in client.get(f"/v1/webhooks/{hook['id']}", headers=admin).json()  # never read back
    assert len(client.get(f"/v1/webhooks/{hook['id']}/deliveries", headers=admin).json()["items"]) == 1  # log kept
    leaked = client.post(f"/v1/webhooks/{hook['id']}/rotate-secret", headers=admin, json={"overlap_seconds": 0})
    assert leaked.json()["previous_secret_expires_at"] is None
    with sessions() as session:
        row = session.get(Webhook, uuid.UUID(hook["id"]))
        assert row is not None and (row.secret, row.previous_secret) == (leaked.json()["secret"], None)
    default = client.post(f"/v1/webhooks/{hook['id']}/rotate-secret", headers=admin, json={}).json()
    left = datetime.fromisoformat(default["previous_secret_expires_at"]) - datetime.now(UTC)
    assert timedelta(hours=23, minutes=59) < left <= timedelta(days=1)  # a day by default
    too_long = client.post(
        f"/v1/webhooks/{hook['id']}/rotate-secret", headers=admin, json={"overlap_seconds": 8 * 86400}
    )
    assert too_long.status_code == 422
    events = client.get("/v1/events", headers=admin).json()["items"]
    assert [e["status"] for e in events if e["action"] == "webhook.rotate_secret"].count(200) == 3
