"""The worker's hard limits on a running audit (issue 16): an audit within the API's budget that goes past the
worker's memory guard, or its wall-clock limit, fails with a ``resource-limit`` problem, and the same worker
process then runs the next audit to success."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from bind_it import Worker, WorkerPool, make_audit_body, wait_for_audit
from fastapi.testclient import TestClient

pytestmark = pytest.mark.integration

GUARD = 150 * 1024**2  # far below the API's 8 GiB budget; one copy of a 5,001-parameter Hessian is 200 MB
MAX_SECONDS = 12


@pytest.fixture
def memory_worker(workers: WorkerPool) -> Iterator[Worker]:
    worker = workers.start(BIND_AUDIT_MEMORY_GUARD=str(GUARD))
    yield worker
    worker.stop()


@pytest.fixture
def clock_worker(workers: WorkerPool) -> Iterator[Worker]:
    worker = workers.start(BIND_AUDIT_MAX_SECONDS=str(MAX_SECONDS))
    yield worker
    worker.stop()


def _next_audit_succeeds(client: TestClient, graph_id: str, workers: WorkerPool, worker: Worker) -> None:
    response = client.post("/v1/audits", json=make_audit_body(graph_id, epochs=20, bootstrap=0))
    assert response.status_code == 202, response.text
    audit = wait_for_audit(client, response.json()["id"], {"succeeded", "failed"}, timeout=120, pool=workers)
    assert audit["state"] == "succeeded", audit["error"]
    assert worker.process.poll() is None


def _added_memory(worker: Worker, audit_id: str) -> int:
    found = re.findall(rf"audit {audit_id} stopped in stage \w+: .*?resident memory added: (\d+) bytes",
                       worker.log.read_text(errors="replace"))  # fmt: skip
    assert found, worker.log.read_text(errors="replace")[-3000:]
    return int(found[-1])


def test_memory_guard_fails_the_audit_and_the_worker_goes_on(
    client: TestClient, graph_id: str, workers: WorkerPool, memory_worker: Worker
) -> None:
    # One-layer GCN of width 500 on 8 features: 5,001 parameters, so the exact solver forms a 5,001 × 5,001
    # float64 Hessian: 200 MB a copy (the API's estimate, five copies, is 1 GB: within its 8 GiB budget).
    worker = memory_worker
    body: dict[str, Any] = make_audit_body(graph_id, epochs=20, solver="exact", model={"hidden": 500}, bootstrap=0)
    response = client.post("/v1/audits", json=body)
    assert response.status_code == 202, response.text  # within the API's budget
    start = time.monotonic()
    audit = wait_for_audit(client, response.json()["id"], {"succeeded", "failed"}, timeout=180, pool=workers)
    assert audit["state"] == "failed", audit
    problem = audit["error"]
    assert problem["type"].endswith("/resource-limit") and problem["status"] == 422, problem
    (limit,) = problem["limits"]
    assert limit["limit"] == "BIND_AUDIT_MEMORY_GUARD" and limit["allowed"] == GUARD
    assert limit["used"] >= GUARD and limit["excess"] == limit["used"] - GUARD
    assert problem["stage"] == "influence" and "Traceback" not in json.dumps(problem)
    assert audit["results"] is None
    added = _added_memory(worker, audit["id"])
    print(json.dumps({"guard": "memory", "stage": problem["stage"], "added_bytes_peak": added,
                      "failed_after_s": round(time.monotonic() - start, 1)}))  # fmt: skip
    assert added < 4 * GUARD  # stopped near the guard, not after growing without bound
    _next_audit_succeeds(client, graph_id, workers, worker)


def test_wall_clock_limit_fails_the_audit_and_the_worker_goes_on(
    client: TestClient, graph_id: str, workers: WorkerPool, clock_worker: Worker
) -> None:
    worker = clock_worker
    response = client.post("/v1/audits", json=make_audit_body(graph_id, epochs=100_000, bootstrap=0))
    assert response.status_code == 202, response.text
    audit = wait_for_audit(client, response.json()["id"], {"succeeded", "failed"}, timeout=120, pool=workers)
    assert audit["state"] == "failed", audit
    problem = audit["error"]
    assert problem["type"].endswith("/resource-limit"), problem
    (limit,) = problem["limits"]
    assert limit["limit"] == "BIND_AUDIT_MAX_SECONDS" and limit["allowed"] == MAX_SECONDS
    assert MAX_SECONDS < limit["used"] < MAX_SECONDS + 5, limit
    assert problem["stage"] == "training"
    _next_audit_succeeds(client, graph_id, workers, worker)
