"""A worker killed with SIGKILL mid-audit: the audit is retried by the next worker and finishes once."""

from __future__ import annotations

import uuid

import pytest
from bind_it import WorkerPool, make_audit_body, wait_for_audit
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db.session import engine_for, session_factory
from app.core.db.tables import InfluenceRow
from app.core.settings import Settings

pytestmark = pytest.mark.integration


def test_killed_worker_audit_is_finished_exactly_once_by_the_next(
    client: TestClient, graph_id: str, workers: WorkerPool, api_settings: Settings
) -> None:
    first = workers.start()
    response = client.post("/v1/audits", json=make_audit_body(graph_id, epochs=2000))
    audit_id = response.json()["id"]
    running = wait_for_audit(client, audit_id, {"running"}, until=lambda a: a["progress"] > 0.05, pool=workers)
    assert running["attempts"] == 1
    first.kill()

    workers.start()  # its sweeper finds the stale heartbeat, re-queues the audit and re-sends its task
    audit = wait_for_audit(client, audit_id, {"succeeded", "failed"}, timeout=120, pool=workers)
    assert audit["state"] == "succeeded", audit["error"]
    assert audit["attempts"] == 2
    assert "worker presumed dead; re-queued" in workers.logs()

    with session_factory(engine_for(api_settings.database_url))() as session:
        rows = session.scalar(select(func.count()).where(InfluenceRow.audit_id == uuid.UUID(audit_id)))
        positions = session.scalar(
            select(func.count(func.distinct(InfluenceRow.position))).where(InfluenceRow.audit_id == uuid.UUID(audit_id))
        )
    assert rows == positions and rows and rows > 0
