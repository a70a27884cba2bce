"""Cancelling an audit in each of its long stages stops the worker's computation within seconds (issue 16).

A real Celery worker process on Postgres and Redis. Each case waits until the audit is inside the stage (from
its ``stage`` and ``progress``), cancels it, and measures the time from the cancel request to the worker's
"cancelled during attempt" log line (the task has returned: the worker is idle), then checks that the worker
process uses (almost) no CPU over the next second. The issue's figure for the old behaviour: still at full CPU
80 s after a cancel during the Hessian.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from typing import Any

import psutil
import pytest
from bind_it import Worker, WorkerPool, synthetic_npz, wait_for_audit
from fastapi.testclient import TestClient

from bind_core.data.datasets import load_npz
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train

pytestmark = pytest.mark.integration

IDLE_WITHIN_S = 6.0  # the issue asks for 5 s; measured: 0.1–0.9 s (docs/RELIABILITY.md)
TWO_LAYER: dict[str, Any] = {"arch": "gcn", "layers": 2, "hidden": 20}
QUIET = {"bootstrap": 0, "validation_sample": 0, "budgets": [1]}


@pytest.fixture(scope="module")
def worker(workers: WorkerPool) -> Worker:
    return workers.start()


@pytest.fixture(scope="module")
def big_graph(client: TestClient) -> tuple[str, bytes]:
    npz = synthetic_npz(1500, seed=7)
    response = client.post("/v1/graphs", files={"npz": ("big.npz", npz)}, data={"name": "cancel-big"})
    assert response.status_code == 201, response.text
    return str(response.json()["id"]), npz


@pytest.fixture(scope="module")
def supplied_model(client: TestClient, big_graph: tuple[str, bytes]) -> str:
    """A polished two-layer GCN on the big graph, so that the later stages start at once."""
    graph_id, npz = big_graph
    model = train(load_npz(io.BytesIO(npz)), TrainConfig(epochs=50, lr=0.01, polish=True), ModelConfig(**TWO_LAYER))
    assert model.stationarity.polished
    response = client.post(
        "/v1/models",
        files={"weights": ("m.safetensors", model.to_bytes())},
        data={"config": json.dumps(model.config_dict()), "graph_id": graph_id},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def _cancel_inside(
    client: TestClient,
    workers: WorkerPool,
    worker: Worker,
    body: dict[str, Any],
    stage: str,
    inside: Callable[[dict[str, Any]], bool],
) -> dict[str, Any]:
    response = client.post("/v1/audits", json=body)
    assert response.status_code == 202, response.text
    audit_id = response.json()["id"]
    wait_for_audit(client, audit_id, {"running"}, until=inside, timeout=300, pool=workers)
    start = time.monotonic()
    cancel = client.post(f"/v1/audits/{audit_id}/cancel")
    assert cancel.status_code == 200, cancel.text
    cancelled = cancel.json()
    assert (cancelled["state"], cancelled["stage"]) == ("cancelled", stage), cancelled
    line = f"audit {audit_id}: cancelled during attempt 1"
    while line not in worker.log.read_text(errors="replace") and time.monotonic() - start < 120:
        time.sleep(0.05)
    idle_after = time.monotonic() - start
    assert line in worker.log.read_text(errors="replace"), workers.logs()
    before = _cpu_seconds(worker.process.pid)
    time.sleep(1.0)
    busy = _cpu_seconds(worker.process.pid) - before
    audit = client.get(f"/v1/audits/{audit_id}").json()
    assert (audit["state"], audit["results"], audit["error"]) == ("cancelled", None, None)
    assert client.get(f"/v1/audits/{audit_id}/influence").status_code == 409  # no rows left behind
    figures = {"stage": stage, "progress": cancelled["progress"], "idle_after_s": round(idle_after, 2),
               "cpu_s_in_next_second": round(busy, 3)}  # fmt: skip
    print(json.dumps(figures))
    assert worker.process.poll() is None
    assert idle_after < IDLE_WITHIN_S, figures
    assert busy < 0.5, figures
    return figures


def _in(stage: str, low: float, high: float = 1.0) -> Callable[[dict[str, Any]], bool]:
    return lambda audit: audit["stage"] == stage and low < audit["progress"] < high


def test_cancel_during_training_epochs(client: TestClient, graph_id: str, workers: WorkerPool, worker: Worker) -> None:
    body = {"graph_id": graph_id, "training": {"epochs": 100_000, "lr": 0.01}, **QUIET}
    _cancel_inside(client, workers, worker, body, "training", _in("training", 0.01))


def test_cancel_during_the_polish(
    client: TestClient, big_graph: tuple[str, bytes], workers: WorkerPool, worker: Worker
) -> None:
    # Four stages: the training's polish reports from 0.8 of its quarter; past 0.95 the Newton finish, which
    # forms Hessians row by row, is running.
    body = {
        "graph_id": big_graph[0],
        "model": TWO_LAYER,
        "training": {"epochs": 50, "lr": 0.01, "polish": True},
        **QUIET,
    }
    _cancel_inside(client, workers, worker, body, "training", _in("training", 0.95 / 4))


@pytest.mark.parametrize(
    ("name", "settings", "stage", "window"),
    [
        # Influence is the third of four stages: its fraction f shows as (2 + f) / 4. The linear estimate with
        # the exact solver forms the Hessian for f in (0.1, 0.4) and the per-node terms for f in (0.5, 1).
        # the exact solver forms the Hessian for f in (0.1, 0.4) and the per-node terms from f = 0.5 (reported
        # at 0.5 until the first batch of deletions is done).
        ("hessian rows", {"estimator": "linear", "solver": "exact", **QUIET}, "influence", (2.12 / 4, 2.4 / 4)),
        ("per-node terms", {"estimator": "linear", "solver": "exact", **QUIET}, "influence", (2.48 / 4, 3 / 4)),
        ("debiasing retrains", {"estimator": "linear", "bootstrap": 0, "validation_sample": 0, "budgets": [1, 2, 3]},
         "debiasing", (3.02 / 4, 1)),
        ("validation retrains", {"estimator": "linear", "bootstrap": 0, "validation_sample": 5, "budgets": []},
         "validation", (3.02 / 4, 1)),
    ],
)  # fmt: skip
def test_cancel_during_a_later_stage(
    client: TestClient,
    supplied_model: str,
    workers: WorkerPool,
    worker: Worker,
    name: str,
    settings: dict[str, Any],
    stage: str,
    window: tuple[float, float],
) -> None:
    body = {"model_id": supplied_model, **settings}
    _cancel_inside(client, workers, worker, body, stage, _in(stage, *window))
