"""Scheduled audits and webhooks on the real stack: slots become audits once, across scheduler restarts and
races; deliveries are signed, verified by a local receiver and retried after a 500."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from bind_it import WorkerPool, synthetic_npz
from fastapi.testclient import TestClient
from receiver import Receiver, serve
from sqlalchemy import update

from app.core.db.session import engine_for, session_factory
from app.core.db.tables import Schedule
from app.core.settings import Settings
from app.main import create_app
from app.schedules.scheduler import tick

pytestmark = pytest.mark.integration

# The receiver listens on 127.0.0.1: both the API (subscription) and the workers (delivery) must allow it.
FAST = {"BIND_SCHEDULER_INTERVAL": "0.2", "BIND_WEBHOOK_RETRY_BASE": "0.5", "BIND_WEBHOOK_ALLOW_PRIVATE": "true"}
TINY = {"training": {"epochs": 20}, "budgets": [1], "validation_sample": 0, "bootstrap": 0}


def runs(client: TestClient, schedule_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/schedules/{schedule_id}/runs")
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


def wait_runs(client: TestClient, schedule_id: str, ok: Any, pool: WorkerPool, timeout: float = 60) -> list[Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = runs(client, schedule_id)
        if ok(items):
            return items
        time.sleep(0.2)
    raise AssertionError(f"runs of {schedule_id}: {runs(client, schedule_id)}\n{pool.logs()}")


def test_two_schedulers_never_run_a_slot_twice(client: TestClient, database_url: str) -> None:
    # A graph deleted after the schedule was made (a name that never existed is refused at creation): each slot's
    # audit is recorded failed at once, nothing is sent, and the schedule itself carries on.
    upload = client.post("/v1/graphs", files={"npz": ("s.npz", synthetic_npz(200, seed=7))}, data={"name": "gone"})
    assert upload.status_code == 201, upload.text
    body = {"graph_name": "gone", "interval_seconds": 60, "audit": TINY}
    created = client.post("/v1/schedules", json=body)
    assert created.status_code == 201, created.text
    schedule_id = created.json()["id"]
    assert client.delete(f"/v1/graphs/{upload.json()['id']}").status_code == 204
    sessions = session_factory(engine_for(database_url))
    at = datetime.fromisoformat(client.get(f"/v1/schedules/{schedule_id}").json()["next_run_at"])
    barrier = threading.Barrier(2)

    def scheduler() -> None:
        barrier.wait()
        tick(sessions, at)

    threads = [threading.Thread(target=scheduler) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tick(sessions, at)  # a late third tick for the same moment
    # Even a schedule put back on a slot that already ran (a lost update) does not run it again.
    with sessions.begin() as session:
        session.execute(update(Schedule).where(Schedule.id == schedule_id).values(next_run_at=at))
    tick(sessions, at + timedelta(seconds=1))
    items = runs(client, schedule_id)
    assert len(items) == 1, items
    assert items[0]["state"] == "failed" and datetime.fromisoformat(items[0]["slot_time"]) == at
    error = client.get(f"/v1/audits/{items[0]['audit_id']}").json()["error"]
    assert error["type"].endswith("/graph-not-found") and "'gone'" in error["detail"]
    assert client.get(f"/v1/schedules/{schedule_id}").json()["state"] == "active"  # still scheduled
    client.delete(f"/v1/schedules/{schedule_id}")


def test_interval_schedule_survives_a_scheduler_restart(client: TestClient, workers: WorkerPool) -> None:
    upload = client.post("/v1/graphs", files={"npz": ("s.npz", synthetic_npz(200, seed=7))}, data={"name": "sched"})
    assert upload.status_code == 201, upload.text
    body = {"graph_name": "sched", "interval_seconds": 2, "audit": TINY, "thresholds": {"delta_sp": 0.0}}
    schedule_id = client.post("/v1/schedules", json=body).json()["id"]
    worker = workers.start(**FAST)
    first = wait_runs(client, schedule_id, lambda r: len(r) >= 2 and any(x["state"] == "succeeded" for x in r), workers)
    worker.stop()  # the scheduler goes down with the worker (after its current audit)
    before = len(runs(client, schedule_id))
    assert before >= len(first)
    workers.start(**FAST)
    wait_runs(client, schedule_id, lambda r: len(r) >= before + 2, workers)
    assert client.post(f"/v1/schedules/{schedule_id}/pause").json()["state"] == "paused"
    items = runs(client, schedule_id)
    slots = [datetime.fromisoformat(r["slot_time"]) for r in items]
    assert len(set(slots)) == len(slots), items  # no slot twice
    assert all(((s - slots[-1]).total_seconds() % 2) == 0 for s in slots)  # all on the 2 s grid
    assert {r["graph_version"] for r in items} == {1}
    done = [r for r in items if r["state"] == "succeeded"]
    assert done and all(r["delta_sp"] is not None for r in done)
    assert all(r["breaches"] and r["breaches"][0]["metric"] == "delta_sp" for r in done)
    for r in items:
        if r["state"] in ("queued", "running"):
            client.post(f"/v1/audits/{r['audit_id']}/cancel")


@pytest.fixture(scope="module")
def loopback_client(api_settings: Settings, client: TestClient) -> Iterator[TestClient]:
    """The same tenant on an API that accepts webhook URLs on loopback (``BIND_WEBHOOK_ALLOW_PRIVATE``)."""
    allowing = api_settings.model_copy(update={"webhook_allow_private": True})
    with TestClient(create_app(allowing), headers=dict(client.headers)) as test_client:
        yield test_client


def test_signed_webhooks_with_a_retry(client: TestClient, loopback_client: TestClient, workers: WorkerPool) -> None:
    if not any(w.process.poll() is None for w in workers.workers):
        workers.start(**FAST)
    receiver = Receiver(fail_first=1)
    server, url = serve(receiver)
    events = ["audit.succeeded", "schedule.threshold_exceeded"]
    refused = client.post("/v1/webhooks", json={"url": url, "events": events})  # the default refuses loopback
    assert refused.status_code == 422 and "BIND_WEBHOOK_ALLOW_PRIVATE" in refused.json()["detail"], refused.text
    hook = loopback_client.post("/v1/webhooks", json={"url": url, "events": events}).json()
    receiver.secret = hook["secret"]
    try:
        client.post("/v1/graphs", files={"npz": ("h.npz", synthetic_npz(200, seed=8))}, data={"name": "hooked"})
        body = {"graph_name": "hooked", "interval_seconds": 3600, "audit": TINY, "thresholds": {"gamma": 0.0}}
        schedule_id = client.post("/v1/schedules", json=body).json()["id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sorted(set(receiver.events())) != sorted(events):
            time.sleep(0.2)
        assert sorted(receiver.events()) == sorted(events), (receiver.requests, workers.logs())
        assert receiver.rejected == 0
        run = runs(client, schedule_id)[0]
        by_type = {e["type"]: e for _, e in receiver.received}
        assert by_type["audit.succeeded"]["data"]["audit_id"] == run["audit_id"]
        exceeded = by_type["schedule.threshold_exceeded"]["data"]
        assert exceeded["schedule_id"] == schedule_id and exceeded["breaches"][0]["metric"] == "gamma"
        log = client.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["items"]
        assert sorted(d["event"] for d in log) == sorted(events)
        assert all(d["state"] == "succeeded" for d in log)
        assert sorted(d["attempts"] for d in log) == [1, 2]  # the first answer was a 500, then a retry
        retried = next(d for d in log if d["attempts"] == 2)
        assert (retried["response_status"], retried["last_error"]) == (204, None)
        assert {f"msg_{d['id'].replace('-', '')}" for d in log} == {m for m, _ in receiver.received}
        client.post(f"/v1/schedules/{schedule_id}/pause")
        # a test event on request, and a delivery sent again: signed alike, the resent one with its own webhook-id
        pinged = client.post(f"/v1/webhooks/{hook['id']}/ping").json()
        first = next(d for d in log if d["event"] == "audit.succeeded")
        assert client.post(f"/v1/webhooks/{hook['id']}/deliveries/{first['id']}/redeliver").status_code == 202
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(receiver.received) < len(events) + 2:
            time.sleep(0.2)
        ids = [m for m, _ in receiver.received]
        assert receiver.events().count("webhook.ping") == 1 and receiver.rejected == 0, receiver.requests
        assert f"msg_{pinged['id'].replace('-', '')}" in ids
        assert ids.count(f"msg_{first['id'].replace('-', '')}") == 2
        resent = client.get(f"/v1/webhooks/{hook['id']}/deliveries/{first['id']}").json()
        assert (resent["state"], resent["attempts"]) == ("succeeded", 1)
        # a rotated secret keeps signing beside the new one: the receiver checks the old one, then the new one
        rotated = client.post(f"/v1/webhooks/{hook['id']}/rotate-secret", json={"overlap_seconds": 600}).json()
        for secret in (hook["secret"], rotated["secret"]):
            receiver.secret, count = secret, len(receiver.received)
            client.post(f"/v1/webhooks/{hook['id']}/ping")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(receiver.received) == count:
                time.sleep(0.2)
            assert len(receiver.received) == count + 1 and receiver.rejected == 0, receiver.requests
    finally:
        client.delete(f"/v1/webhooks/{hook['id']}")
        server.shutdown()
