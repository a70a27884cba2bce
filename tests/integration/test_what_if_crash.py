"""A worker killed with SIGKILL mid-verification of a what-if: the next worker's sweeper re-queues the job and it
finishes, with one result, on the second attempt."""

from __future__ import annotations

import time
from typing import Any

import pytest
from bind_it import WorkerPool, make_audit_body, wait_for_audit
from fastapi.testclient import TestClient

pytestmark = pytest.mark.integration


def _wait_for_job(
    client: TestClient, url: str, states: set[str], *, timeout: float, pool: WorkerPool, min_progress: float = 0.0
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        job = client.get(url).json()
        if job["state"] in states and job["progress"] >= min_progress:
            return job
        time.sleep(0.2)
    raise AssertionError(f"what-if {url} not in {states} after {timeout}s: {job}\n{pool.logs()}")


def test_a_killed_workers_verification_is_finished_by_the_next(
    client: TestClient, graph_id: str, workers: WorkerPool
) -> None:
    first = workers.start()
    audit_id = client.post("/v1/audits", json=make_audit_body(graph_id, epochs=2000)).json()["id"]
    audit = wait_for_audit(client, audit_id, {"succeeded", "failed"}, timeout=180, pool=workers)
    assert audit["state"] == "succeeded", audit["error"]
    answer = client.post(f"/v1/audits/{audit_id}/what-if", json={"top": 2, "verify": True, "random_sets": 1})
    assert answer.status_code == 202, answer.text
    url = answer.headers["Location"]
    running = _wait_for_job(client, url, {"running"}, timeout=120, pool=workers, min_progress=0.1)
    assert running["attempts"] == 1
    first.kill()

    workers.start()  # its sweeper finds the stale heartbeat, re-queues the job and re-sends its task
    job = _wait_for_job(client, url, {"succeeded", "failed"}, timeout=300, pool=workers)
    assert job["state"] == "succeeded", job["error"]
    assert job["attempts"] == 2 and len(job["result"]["delta"]["effects"]) == len(job["seeds"])
    assert f"what-if {job['id']}: heartbeat older than" in workers.logs()  # the sweeper, not a redelivery
