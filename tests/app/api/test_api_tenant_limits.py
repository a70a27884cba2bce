"""Fair sharing at the API: a tenant's queue has a cap (429 ``tenant-queue-full`` with ``Retry-After``), and
schedules have a floor on how often they run (422 ``schedule-too-frequent``)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from apihelp import assert_problem, fields
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Audit, Tenant
from app.core.settings import Settings
from app.main import create_app
from app.tenants.limits import TenantQueueFull, check_queue_room

LIMIT = 2


@pytest.fixture(scope="module")
def limited(settings: Settings) -> Iterator[TestClient]:
    """The API with ``BIND_TENANT_MAX_QUEUED=2`` and ``BIND_SCHEDULE_MIN_INTERVAL=120``."""
    app = create_app(settings.model_copy(update={"tenant_max_queued": LIMIT, "schedule_min_interval": 120}))
    with TestClient(app) as test_client:
        yield test_client


def tenant_of(sessions: sessionmaker[Session], audit_id: str) -> uuid.UUID:
    with sessions() as session:
        found = session.scalar(select(Audit.tenant_id).where(Audit.id == uuid.UUID(audit_id)))
        assert found is not None
        return found


def test_a_full_queue_is_429_naming_the_limit(
    limited: TestClient, auth: dict[str, str], other_auth: dict[str, str], graph_id: str, graph_npz: bytes,
    sessions: sessionmaker[Session],
) -> None:  # fmt: skip
    body = {"graph_id": graph_id}
    first = limited.post("/v1/audits", headers=auth | {"Idempotency-Key": "one"}, json=body)
    second = limited.post("/v1/audits", headers=auth, json=body)
    assert first.status_code == second.status_code == 202, second.text
    refused = limited.post("/v1/audits", headers=auth, json=body)
    problem = assert_problem(refused, 429, "tenant-queue-full")
    assert "BIND_TENANT_MAX_QUEUED" in problem["detail"] and f"is {LIMIT}" in problem["detail"]
    assert refused.headers["retry-after"] == "30"  # no finished audit to time yet
    assert len(limited.get("/v1/audits", headers=auth).json()["items"]) == LIMIT  # nothing was inserted
    # A replay of an accepted request is answered as before, not refused.
    replay = limited.post("/v1/audits", headers=auth | {"Idempotency-Key": "one"}, json=body)
    assert replay.status_code == 202 and replay.json()["id"] == first.json()["id"]
    # Another tenant has a queue of its own.
    other_graph = limited.post("/v1/graphs", headers=other_auth, files={"npz": ("g.npz", graph_npz)}).json()["id"]
    assert limited.post("/v1/audits", headers=other_auth, json={"graph_id": other_graph}).status_code == 202
    # A running audit no longer counts as queued; Retry-After is the median run time of finished audits.
    tenant = tenant_of(sessions, first.json()["id"])
    now = datetime.now(UTC)
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(first.json()["id"])).values(state="running"))
        for seconds in (10, 40, 400):
            started = now - timedelta(seconds=seconds)
            session.add(Audit(tenant_id=tenant, graph_id=uuid.UUID(graph_id), config={}, request_hash="h" * 64,
                              state="succeeded", started_at=started, finished_at=now))  # fmt: skip
    assert limited.post("/v1/audits", headers=auth, json=body).status_code == 202
    again = limited.post("/v1/audits", headers=auth, json=body)
    assert_problem(again, 429, "tenant-queue-full")
    assert again.headers["retry-after"] == "40"
    for item in limited.get("/v1/audits", headers=auth, params={"state": "queued"}).json()["items"]:
        limited.post(f"/v1/audits/{item['id']}/cancel", headers=auth)


def test_two_requests_cannot_both_take_the_last_place(
    limited: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]
) -> None:
    """The check locks the tenant's row until the request commits: a concurrent check waits, then counts."""
    accepted = limited.post("/v1/audits", headers=auth, json={"graph_id": graph_id})
    assert accepted.status_code == 202, accepted.text
    with sessions() as probe:
        tenant = probe.get(Tenant, tenant_of(sessions, accepted.json()["id"]))
        assert tenant is not None
        probe.expunge(tenant)
    settings = Settings(tenant_max_queued=LIMIT)
    outcome: list[str] = []

    def second_request() -> None:
        with sessions.begin() as session:
            try:
                check_queue_room(session, tenant, settings)
                outcome.append("room")
            except TenantQueueFull:
                outcome.append("full")

    with sessions.begin() as session:
        check_queue_room(session, tenant, settings)  # one place left: passes, and holds the tenant's row
        other = threading.Thread(target=second_request)
        other.start()
        other.join(timeout=1.0)
        assert other.is_alive() and outcome == []  # waiting for this request to commit
        session.add(Audit(tenant_id=tenant.id, graph_id=uuid.UUID(graph_id), config={}, request_hash="h" * 64,
                          state="queued"))  # fmt: skip
    other.join(timeout=10)
    assert outcome == ["full"]
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.tenant_id == tenant.id).values(state="cancelled"))


@pytest.mark.usefixtures("graph_id")  # the graph "g"
def test_schedules_below_the_floor_are_422(limited: TestClient, client: TestClient, auth: dict[str, str]) -> None:
    too_often = limited.post("/v1/schedules", headers=auth, json={"graph_name": "g", "interval_seconds": 60})
    problem = assert_problem(too_often, 422, "schedule-too-frequent")
    assert fields(problem) == {"interval_seconds"} and "BIND_SCHEDULE_MIN_INTERVAL" in problem["detail"]
    assert "120 s" in problem["detail"]
    every_minute = limited.post("/v1/schedules", headers=auth, json={"graph_name": "g", "cron": "* * * * *"})
    assert fields(assert_problem(every_minute, 422, "schedule-too-frequent")) == {"cron"}
    twice_an_hour = limited.post("/v1/schedules", headers=auth, json={"graph_name": "g", "cron": "0,1 * * * *"})
    assert fields(assert_problem(twice_an_hour, 422, "schedule-too-frequent")) == {"cron"}  # one gap of 60 s
    ok = [limited.post("/v1/schedules", headers=auth, json={"graph_name": "g", "interval_seconds": 120}),
          limited.post("/v1/schedules", headers=auth, json={"graph_name": "g", "cron": "*/2 * * * *"})]  # fmt: skip
    # The default floor is 60 s: the probe's one-second schedule is refused.
    second = client.post("/v1/schedules", headers=auth, json={"graph_name": "g", "interval_seconds": 1})
    assert_problem(second, 422, "schedule-too-frequent")
    for response in ok:
        assert response.status_code == 201, response.text
        limited.post(f"/v1/schedules/{response.json()['id']}/pause", headers=auth)
