"""Audits through the real service: API in-process, a Celery worker process, Postgres and Redis."""

from __future__ import annotations

from typing import Any

import pytest
from bind_it import SHARED_DATASETS, WorkerPool, make_audit_body, wait_for_audit
from fastapi.testclient import TestClient

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", autouse=True)
def one_worker(workers: WorkerPool) -> WorkerPool:
    workers.start()
    return workers


def test_audit_succeeds_with_metrics_and_paginated_influence(
    client: TestClient, graph_id: str, workers: WorkerPool
) -> None:
    response = client.post("/v1/audits", json=make_audit_body(graph_id, validation_sample=1))
    assert response.status_code == 202, response.text
    audit_id = response.json()["id"]
    assert response.headers["Location"] == f"/v1/audits/{audit_id}"

    audit = wait_for_audit(client, audit_id, {"succeeded", "failed"}, pool=workers)
    assert audit["state"] == "succeeded", audit["error"]
    assert (audit["attempts"], audit["device"], audit["progress"], audit["error"]) == (1, "cpu", 1.0, None)
    assert audit["started_at"] and audit["finished_at"]
    results = audit["results"]
    assert results["metrics"], results
    assert set(results) >= {"metrics", "influence_summary", "debiasing", "validation", "timings"}

    rows = _all_rows(client, audit_id, "harmful", limit=40)
    graph = client.get(f"/v1/graphs/{graph_id}").json()
    train_size = graph["summary"]["train"]
    assert len(rows) == train_size
    assert len({r["position"] for r in rows}) == train_size  # no duplicates across pages
    deltas = [r["delta"] for r in rows]
    assert deltas == sorted(deltas)  # harmful first: most negative ΔΓ
    helpful = _all_rows(client, audit_id, "helpful", limit=train_size)
    assert [r["position"] for r in helpful] == [r["position"] for r in reversed(rows)]
    assert {"node_id", "group", "label", "delta_sp", "delta_eo"} <= set(rows[0])


def _all_rows(client: TestClient, audit_id: str, order: str, *, limit: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    token: str | None = None
    for _ in range(1000):
        params: dict[str, Any] = {"order": order, "limit": limit}
        if token:
            params["page_token"] = token
        response = client.get(f"/v1/audits/{audit_id}/influence", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["items"]) <= limit
        rows.extend(page["items"])
        token = page["next_page_token"]
        if not token:
            return rows
    raise AssertionError("influence pagination does not end")


@pytest.mark.skipif(not SHARED_DATASETS.is_dir(), reason="the API needs a data root that lists income")
def test_dataset_missing_on_the_worker_fails_with_a_problem(client: TestClient, workers: WorkerPool) -> None:
    # The API sees the shared data root, the worker an empty one: the audit is accepted, then fails.
    response = client.post("/v1/audits", json={"dataset": "income", "training": {"epochs": 5}})
    assert response.status_code == 202, response.text
    audit = wait_for_audit(client, response.json()["id"], {"succeeded", "failed"}, pool=workers)
    assert audit["state"] == "failed"
    assert audit["results"] is None and audit["finished_at"]
    problem = audit["error"]
    assert problem["status"] == 422 and problem["type"].endswith("/dataset-not-found")
    assert {"type", "title", "status", "detail"} <= set(problem)
    assert "Traceback" not in str(problem)
    influence = client.get(f"/v1/audits/{audit['id']}/influence")
    assert influence.status_code == 409
    assert influence.headers["content-type"].startswith("application/problem+json")


def test_cancel_stops_a_running_audit(client: TestClient, graph_id: str, workers: WorkerPool) -> None:
    # 20,000 epochs: long enough to cancel in training, with a progress callback every 200 epochs.
    response = client.post("/v1/audits", json=make_audit_body(graph_id, epochs=20_000))
    audit_id = response.json()["id"]
    wait_for_audit(client, audit_id, {"running"}, until=lambda a: a["progress"] > 0, pool=workers)

    cancel = client.post(f"/v1/audits/{audit_id}/cancel")
    assert cancel.status_code == 200, cancel.text
    assert cancel.json()["state"] == "cancelled"

    # The worker stops at its next progress callback and writes nothing more.
    workers.wait_log(f"audit {audit_id}: cancelled during attempt 1", timeout=60)
    audit = client.get(f"/v1/audits/{audit_id}").json()
    assert (audit["state"], audit["results"], audit["error"], audit["attempts"]) == ("cancelled", None, None, 1)
    assert audit["finished_at"]
    again = client.post(f"/v1/audits/{audit_id}/cancel")
    assert again.status_code in (200, 409), again.text
