"""Faults injected into the real servers: Redis restarted with audits queued, Postgres stopped under the API.

Each outage is a few seconds and always undone (``servers.py``), since other runs share these servers.
"""

from __future__ import annotations

import time
import uuid

import pytest
from bind_it import WorkerPool, make_audit_body, wait_for_audit
from fastapi.testclient import TestClient
from servers import postgres_stopped, restart_redis
from sqlalchemy import func, select

from app.core.db.session import engine_for, session_factory
from app.core.db.tables import InfluenceRow
from app.core.settings import Settings

pytestmark = pytest.mark.integration

FAST_SWEEP = {"BIND_QUEUED_TIMEOUT": "3", "BIND_SWEEP_INTERVAL": "1"}


def test_redis_restart_loses_no_queued_audit(
    client: TestClient, graph_id: str, workers: WorkerPool, api_settings: Settings
) -> None:
    """Four audits on one worker; Redis loses every message mid-way; the sweeper re-sends the queued ones."""
    workers.start(**FAST_SWEEP)
    ids = [client.post("/v1/audits", json=make_audit_body(graph_id, epochs=150)).json()["id"] for _ in range(4)]
    wait_for_audit(client, ids[0], {"running", "succeeded"}, pool=workers)
    restart_redis()
    finished = [wait_for_audit(client, i, {"succeeded", "failed"}, timeout=150, pool=workers) for i in ids]
    assert [a["state"] for a in finished] == ["succeeded"] * 4, [a["error"] for a in finished]
    assert all(a["attempts"] == 1 for a in finished)
    with session_factory(engine_for(api_settings.database_url))() as session:
        for audit_id in ids:
            key = uuid.UUID(audit_id)
            rows = session.scalar(select(func.count()).where(InfluenceRow.audit_id == key))
            distinct = session.scalar(select(func.count(func.distinct(InfluenceRow.position))).where(
                InfluenceRow.audit_id == key))  # fmt: skip
            assert rows == distinct and rows


def test_postgres_outage_gives_503_then_recovers_without_restart(client: TestClient, graph_id: str) -> None:
    assert client.get("/v1/audits").status_code == 200
    with postgres_stopped():
        time.sleep(0.5)
        response = client.get("/v1/audits")
        assert response.status_code == 503, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["type"].endswith("/database-unavailable")
        assert int(response.headers["retry-after"]) > 0
        assert client.get(f"/v1/graphs/{graph_id}").status_code == 503
        ready = client.get("/readyz")
        assert ready.status_code == 503 and "database" in ready.text
    deadline = time.monotonic() + 30
    while client.get("/v1/audits").status_code != 200:  # the same app and pool: stale connections are pre-pinged
        assert time.monotonic() < deadline, "the API did not recover"
        time.sleep(0.2)
    assert client.get(f"/v1/graphs/{graph_id}").status_code == 200
    assert client.get("/readyz").status_code == 200
