"""The worker's Prometheus endpoint (``BIND_WORKER_METRICS_PORT``) scraped from a real worker process after
a succeeded and a failed audit: attempts by outcome, attempt wall time, and the stage timings of the result."""

from __future__ import annotations

import socket
from datetime import datetime

import httpx
import pytest
from bind_it import SHARED_DATASETS, WorkerPool, make_audit_body, wait_for_audit
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` of the worker's ``/metrics``."""
    response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_worker_metrics_after_real_audits(client: TestClient, graph_id: str, workers: WorkerPool) -> None:
    port = free_port()
    workers.start(BIND_WORKER_METRICS_PORT=str(port))
    before = scrape(port)
    assert before.get(("bind_audit_attempts_total", (("outcome", "succeeded"),)), 0.0) == 0.0  # a fresh process

    response = client.post("/v1/audits", json=make_audit_body(graph_id, epochs=20))
    assert response.status_code == 202, response.text
    audit = wait_for_audit(client, response.json()["id"], {"succeeded", "failed"}, timeout=300, pool=workers)
    assert audit["state"] == "succeeded", audit
    failing = SHARED_DATASETS.is_dir()  # the API lists income from the shared folder; the worker's is empty
    if failing:
        response = client.post("/v1/audits", json={"dataset": "income", "training": {"epochs": 5}})
        assert response.status_code == 202, response.text
        done = wait_for_audit(client, response.json()["id"], {"succeeded", "failed"}, timeout=300, pool=workers)
        assert done["state"] == "failed", done

    after = scrape(port)
    succeeded = (("outcome", "succeeded"),)
    assert after[("bind_audit_attempts_total", succeeded)] == 1.0
    assert after[("bind_audit_attempt_seconds_count", succeeded)] == 1.0
    timings = audit["results"]["timings"]
    stages = {k: float(v) for k, v in timings.items() if isinstance(v, int | float)}
    assert {"training", "influence"} <= set(stages), timings
    for stage, seconds in stages.items():
        labels = (("stage", stage),)
        assert after[("bind_audit_stage_seconds_count", labels)] == 1.0, stage
        assert after[("bind_audit_stage_seconds_sum", labels)] == pytest.approx(seconds), stage
    # The attempt's wall time holds its stages, and is about the row's started_at..finished_at (it also
    # covers the claim before and the storing of the results after; generous on a loaded machine).
    wall = (datetime.fromisoformat(audit["finished_at"]) - datetime.fromisoformat(audit["started_at"])).total_seconds()
    attempt = after[("bind_audit_attempt_seconds_sum", succeeded)]
    assert sum(stages.values()) * 0.99 <= attempt <= wall + 30.0, (stages, attempt, wall)
    if failing:
        failed = (("outcome", "failed"),)
        assert after[("bind_audit_attempts_total", failed)] == 1.0
        assert after[("bind_audit_attempt_seconds_count", failed)] == 1.0  # and no stage timings (counts above: 1)
