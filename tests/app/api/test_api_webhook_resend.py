"""A test event and a delivery sent again, on an admin's request: ``POST /v1/webhooks/{id}/ping`` and
``POST …/deliveries/{id}/redeliver`` write (or reset) a pending delivery, send its task to the broker after the
commit, and are read back at ``GET …/deliveries/{id}``; each in the trail. (Signed and received end to end by real
workers: tests/integration/test_schedules.py.)"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import redis
from apihelp import assert_problem
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import WebhookDelivery

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
