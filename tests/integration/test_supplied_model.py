"""Auditing a supplied model and graph versions, through the real service (Postgres, Redis, a worker)."""

from __future__ import annotations

import io
import json

import pytest
import torch
from bind_it import WorkerPool, synthetic_npz, wait_for_audit
from fastapi.testclient import TestClient

from app.supplied import fit as registration
from bind_core.data.datasets import load_npz
from bind_core.debiasing.debias import report
from bind_core.training.fit import TrainConfig, train

pytestmark = pytest.mark.integration

TINY = {"budgets": [1], "validation_sample": 0, "bootstrap": 0}  # no training settings: the model has its own recipe


@pytest.fixture(scope="module", autouse=True)
def one_worker(workers: WorkerPool) -> WorkerPool:
    workers.start()
    return workers


def test_supplied_model_is_audited_as_given_or_polished_beside_it(client: TestClient, workers: WorkerPool) -> None:
    npz = synthetic_npz(200, seed=5)
    graph = client.post("/v1/graphs", files={"npz": ("g.npz", npz)}, data={"name": "supplied"}).json()
    local = load_npz(io.BytesIO(npz))
    model = train(local, TrainConfig(epochs=30, lr=0.01, polish=False))
    registered = client.post(
        "/v1/models",
        files={"weights": ("m.safetensors", model.to_bytes())},
        data={"config": json.dumps(model.config_dict()), "graph_id": graph["id"]},
    )
    assert registered.status_code == 201, registered.text
    own = report(model, local)  # the supplied model's own metrics

    response = client.post("/v1/audits", json={"model_id": registered.json()["id"], **TINY})
    assert response.status_code == 202, response.text
    assert response.json()["graph_id"] == graph["id"]
    audit = wait_for_audit(client, response.json()["id"], {"succeeded", "failed"}, pool=workers)
    assert audit["state"] == "succeeded", audit["error"]
    supplied = audit["results"]["supplied_model"]
    assert supplied["reference"] == "as_given" and supplied["polished_by_service"] is False
    assert audit["results"]["stationarity"]["stationary"] is False  # reported, not refused
    for key in ("accuracy", "delta_sp", "delta_eo", "gamma"):
        assert audit["results"]["metrics"]["test"][key] == pytest.approx(getattr(own, key), abs=1e-6), key

    body = {"model_id": registered.json()["id"], **TINY, "reference": "polished"}
    response = client.post("/v1/audits", json=body)
    assert response.status_code == 202, response.text
    audit = wait_for_audit(client, response.json()["id"], {"succeeded", "failed"}, pool=workers)
    assert audit["state"] == "succeeded", audit["error"]
    supplied = audit["results"]["supplied_model"]
    assert supplied["polished_by_service"] is True and supplied["grad_norm"] < supplied["grad_norm_supplied"]
    comparison = supplied["comparison"]
    assert comparison["as_given"]["gamma"] == pytest.approx(own.gamma, abs=1e-6)
    assert comparison["polished"]["gamma"] == pytest.approx(audit["results"]["metrics"]["test"]["gamma"], abs=1e-12)
    assert 0.0 <= comparison["predictions_differ"] <= 1.0


def test_a_model_no_better_than_a_constant_is_warned_of_on_the_audit(client: TestClient, workers: WorkerPool) -> None:
    """A model that predicts the rarer class for every node, confidently (its ranking kept: its outputs are in the
    right order), as a model fed inputs it never saw does: the audit's ``warnings`` say so (stored once the model and
    metrics are in, while it runs; then the results' list)."""
    npz = synthetic_npz(200, seed=5)
    graph = client.post("/v1/graphs", files={"npz": ("g.npz", npz)}, data={"name": "shifted"}).json()
    local = load_npz(io.BytesIO(npz))
    model = train(local, TrainConfig(epochs=30, lr=0.01, polish=False))
    rarer = int(torch.bincount(local.y[local.train_idx]).argmin())
    with torch.no_grad():
        model.module.head.bias.fill_(30.0 if rarer == 1 else -30.0)
    registered = client.post(
        "/v1/models",
        files={"weights": ("m.safetensors", model.to_bytes())},
        data={"config": json.dumps(model.config_dict()), "graph_id": graph["id"]},
    )
    assert registered.status_code == 201, registered.text
    response = client.post("/v1/audits", json={"model_id": registered.json()["id"], **TINY, "stages": ["metrics"]})
    assert response.status_code == 202, response.text
    audit = wait_for_audit(client, response.json()["id"], {"succeeded", "failed"}, pool=workers)
    assert audit["state"] == "succeeded", audit["error"]
    assert audit["results"]["supplied_model"]["training_fit"]["no_better"] is True
    assert any("no better than a constant" in w for w in audit["warnings"])
    assert audit["warnings"] == audit["results"]["warnings"]
    assert "training_fit" in audit["warning_codes"] and audit["warning_codes"] == audit["results"]["warning_codes"]


def test_supplied_model_predicting_nan_fails_clearly(
    client: TestClient, workers: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NaN weights used to give NaN probabilities, read as class-0 predictions: the registration, which reads the
    model on its graph, refuses it (422); registered where its graph is too large to read there, its audit fails,
    422."""
    npz = synthetic_npz(200, seed=5)
    graph = client.post("/v1/graphs", files={"npz": ("g.npz", npz)}, data={"name": "nan-model"}).json()
    model = train(load_npz(io.BytesIO(npz)), TrainConfig(epochs=2, polish=False))
    with torch.no_grad():
        next(model.module.parameters()).fill_(float("nan"))
    parts = {
        "files": {"weights": ("m.safetensors", model.to_bytes())},
        "data": {"config": json.dumps(model.config_dict()), "graph_id": graph["id"]},
    }
    refused = client.post("/v1/models", **parts)  # type: ignore[arg-type]
    assert refused.status_code == 422 and refused.json()["type"].endswith("/invalid-model"), refused.text
    assert "not finite" in refused.json()["detail"]
    monkeypatch.setattr(registration, "CHECK_MAX_NODES", 0)
    registered = client.post("/v1/models", **parts)  # type: ignore[arg-type]
    assert registered.status_code == 201, registered.text
    assert registered.json()["fit_not_checked"] is not None
    response = client.post("/v1/audits", json={"model_id": registered.json()["id"], **TINY})
    audit = wait_for_audit(client, response.json()["id"], {"succeeded", "failed"}, pool=workers)
    assert audit["state"] == "failed", audit["results"]
    error = audit["error"]
    assert error["type"].endswith("/model-output-not-finite") and error["status"] == 422, error
    assert "not finite" in error["detail"] and error["instance"] == f"/v1/audits/{audit['id']}"


def test_model_of_the_wrong_shape_is_422(client: TestClient, graph_id: str) -> None:
    model = train(load_npz(io.BytesIO(synthetic_npz(200, seed=5))), TrainConfig(epochs=2, polish=False))
    config = {**model.config_dict(), "num_classes": 3}
    response = client.post(
        "/v1/models",
        files={"weights": ("m", model.to_bytes())},
        data={"config": json.dumps(config), "graph_id": graph_id},
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")


def test_cli_submit_waits_and_fails_on_a_threshold(client: TestClient, workers: WorkerPool) -> None:
    from app.cli import build_parser
    from app.client import THRESHOLD, run

    client.post("/v1/graphs", files={"npz": ("c.npz", synthetic_npz(200, seed=6))}, data={"name": "ci"})
    argv = ["submit", "--graph-name", "ci", "--settings", json.dumps(TINY), "--wait", "--poll", "0.2"]
    lines: list[str] = []
    code = run(build_parser().parse_args([*argv, "--timeout", "90", "--fail-on", "gamma>0"]), client, lines.append)
    assert code == THRESHOLD, (lines, workers.logs())
    assert json.loads(lines[-1])["thresholds_crossed"]
