"""POST/GET /v1/audits and cancel: defaults, validation, enqueueing, idempotency, isolation, paging."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
from apihelp import assert_problem, fields
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Audit
from app.core.settings import Settings
from app.main import create_app


def queued_task_ids(redis_client: redis.Redis) -> list[str]:
    """Task ids of the messages waiting in Celery's default queue."""
    messages: list[Any] = redis_client.lrange("celery", 0, -1)  # type: ignore[assignment]  # sync client
    return [json.loads(m)["headers"]["id"] for m in messages]


def test_create_audit_with_paper_defaults(
    client: TestClient, auth: dict[str, str], graph_id: str, redis_client: redis.Redis
) -> None:
    response = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id})
    assert response.status_code == 202, response.text
    audit = response.json()
    assert response.headers["location"] == f"/v1/audits/{audit['id']}"
    assert audit["state"] == "queued" and audit["progress"] == 0 and audit["graph_id"] == graph_id
    assert audit["results"] is None and audit["error"] is None
    config = audit["config"]
    assert config["model"]["arch"] == "gcn" and config["model"]["hidden"] == 16
    assert config["training"]["epochs"] == 1000 and config["training"]["seed"] == 10
    assert config["lam"] == 0.5 and config["budgets"] == [0.01, 0.1] and config["validation_sample"] == 50
    assert config["refine_steps"] == 0 and config["estimator"] == "auto" and config["debias_seeds"] == []
    assert config["debias_random_sets"] == 3 and config["training"]["newton_seconds"] == 900.0
    assert config["debias_retrain"] == "audit"
    assert config["training"]["batch_size"] == 0 and config["training"]["fan_out"] == []
    assert audit["id"] in queued_task_ids(redis_client)  # sent to the real broker after the commit
    again = client.get(f"/v1/audits/{audit['id']}", headers=auth).json()
    assert again["id"] == audit["id"] and again["state"] == "queued"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "body"),
        ({"graph_id": str(uuid.uuid4()), "dataset": "income"}, "body"),
        ({"graph_id": str(uuid.uuid4())}, "graph_id"),
        ({"dataset": "income"}, "dataset"),
        ({"dataset": "no-such-dataset"}, "dataset"),
        ({"dataset": "x", "model": {"arch": "mlp"}}, "model.arch"),
        ({"dataset": "x", "training": {"epochs": 100_001}}, "training.epochs"),
        ({"dataset": "x", "lam": 1.5}, "lam"),
        ({"dataset": "x", "budgets": [0.1, -1]}, "budgets"),
        ({"dataset": "x", "budgets": [1.5]}, "budgets"),
        ({"dataset": "x", "solver": "magic"}, "solver"),
        ({"dataset": "x", "surprise": 1}, "surprise"),
        ({"dataset": "x", "min_group_size": -1}, "min_group_size"),
        ({"dataset": "x", "stability_seeds": [1]}, "stability_seeds"),
        ({"dataset": "x", "stability_seeds": [1, 1]}, "stability_seeds"),
        ({"dataset": "x", "refine_steps": -1}, "refine_steps"),
        ({"dataset": "x", "refine_steps": 10_001}, "refine_steps"),
        ({"dataset": "x", "estimator": "exact"}, "estimator"),
        ({"dataset": "x", "debias_seeds": [1, 2]}, "debias_seeds"),
        ({"dataset": "x", "debias_seeds": [1, 1, 2]}, "debias_seeds"),
        ({"dataset": "x", "debias_random_sets": 0}, "debias_random_sets"),
        ({"dataset": "x", "debias_retrain": "polish"}, "debias_retrain"),
        ({"dataset": "x", "debias_retrain": True}, "debias_retrain"),
        ({"dataset": "x", "training": {"newton_seconds": 0}}, "training.newton_seconds"),
        ({"dataset": "x", "training": {"batch_size": -1}}, "training.batch_size"),
        ({"dataset": "x", "training": {"fan_out": [10, 0]}}, "training.fan_out"),
        ({"dataset": "x", "training": {"fan_out": [-2]}}, "training.fan_out"),
    ],
)
def test_invalid_audit_requests(client: TestClient, auth: dict[str, str], body: dict[str, Any], field: str) -> None:
    problem = assert_problem(client.post("/v1/audits", headers=auth, json=body), 422)
    assert field in fields(problem), problem


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"training": {"epochs": True}}, "training.epochs"),  # was accepted as 1
        ({"training": {"epochs": "200"}}, "training.epochs"),
        ({"training": {"epochs": 200.0}}, "training.epochs"),
        ({"training": {"lr": True}}, "training.lr"),
        ({"training": {"lr": "0.01"}}, "training.lr"),
        ({"model": {"hidden": False}}, "model.hidden"),
        ({"model": {"dropout": "0.1"}}, "model.dropout"),
        ({"lam": True}, "lam"),
        ({"budgets": [True]}, "budgets.0"),
        ({"budgets": ["0.1"]}, "budgets.0"),
        ({"non_iid": 1}, "non_iid"),
        ({"non_iid": "false"}, "non_iid"),
        ({"debias_utility": "yes"}, "debias_utility"),
        ({"validation_sample": False}, "validation_sample"),
        ({"stability_seeds": [True, 2]}, "stability_seeds.0"),
        ({"bootstrap": "1000"}, "bootstrap"),
    ],
)
def test_strict_json_types(
    client: TestClient, auth: dict[str, str], graph_id: str, body: dict[str, Any], field: str
) -> None:
    """Booleans are not integers and strings are not numbers: each is a 422 naming the field."""
    problem = assert_problem(client.post("/v1/audits", headers=auth, json={"graph_id": graph_id} | body), 422)
    assert fields(problem) == {field}, problem


def test_debias_retrain_adam_is_accepted(client: TestClient, auth: dict[str, str], graph_id: str) -> None:
    body = {"graph_id": graph_id, "debias_seeds": [1, 2, 3], "debias_retrain": "adam"}
    response = client.post("/v1/audits", headers=auth, json=body)
    assert response.status_code == 202, response.text
    assert response.json()["config"]["debias_retrain"] == "adam"


def test_a_min_group_size_that_leaves_one_group_is_refused_before_it_is_queued(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]
) -> None:
    """The graph's summary holds its test nodes per group: the audit would fail at once, so it is not queued."""
    summary = client.get(f"/v1/graphs/{graph_id}", headers=auth).json()["summary"]
    sizes = summary["test_group_sizes"]
    assert len(sizes) == summary["groups"] and sum(sizes) == summary["test"]
    too_big = max(sizes) + 1
    with sessions() as session:
        before = session.scalar(select(func.count()).select_from(Audit))
    response = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id, "min_group_size": too_big})
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"].endswith("/invalid-config") and problem["errors"][0]["field"] == "min_group_size"
    assert f"min_group_size: {too_big} leaves 0 group(s)" in problem["detail"]
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Audit)) == before  # nothing was queued
    fits = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id, "min_group_size": min(sizes)})
    assert fits.status_code == 202, fits.text


def test_integers_are_numbers(client: TestClient, auth: dict[str, str], graph_id: str) -> None:
    """The forms the API documents still pass: a JSON integer where a float is expected."""
    body = {"graph_id": graph_id, "lam": 1, "budgets": [1, 0.1], "training": {"lr": 1, "weight_decay": 0}}
    response = client.post("/v1/audits", headers=auth, json=body)
    assert response.status_code == 202, response.text
    config = response.json()["config"]
    assert config["lam"] == 1.0 and config["budgets"] == [1.0, 0.1] and config["training"]["lr"] == 1.0


def test_malformed_json(client: TestClient, auth: dict[str, str]) -> None:
    headers = auth | {"Content-Type": "application/json"}
    assert_problem(client.post("/v1/audits", headers=headers, content=b"{not json"), 422)


def test_idempotency(client: TestClient, auth: dict[str, str], graph_id: str, redis_client: redis.Redis) -> None:
    headers = auth | {"Idempotency-Key": "req-1"}
    first = client.post("/v1/audits", headers=headers, json={"graph_id": graph_id, "lam": 0.3})
    assert first.status_code == 202
    # The same body, spelled differently (a default made explicit), is the same request.
    second = client.post("/v1/audits", headers=headers, json={"lam": 0.3, "graph_id": graph_id, "solver": "auto"})
    assert second.status_code == 202 and second.json()["id"] == first.json()["id"]
    assert second.headers["idempotent-replayed"] == "true"
    assert queued_task_ids(redis_client).count(first.json()["id"]) == 1
    other = client.post("/v1/audits", headers=headers, json={"graph_id": graph_id, "lam": 0.4})
    assert_problem(other, 409, "idempotency-key-reused")
    # Keys belong to a tenant; no key, no deduplication.
    assert client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"] != first.json()["id"]


def test_idempotency_keys_are_per_tenant(
    client: TestClient, auth: dict[str, str], other_auth: dict[str, str], graph_id: str, graph_npz: bytes
) -> None:
    other_graph = client.post("/v1/graphs", headers=other_auth, files={"npz": ("g.npz", graph_npz)}).json()["id"]
    mine = client.post("/v1/audits", headers=auth | {"Idempotency-Key": "k"}, json={"graph_id": graph_id})
    theirs = client.post("/v1/audits", headers=other_auth | {"Idempotency-Key": "k"}, json={"graph_id": other_graph})
    assert mine.status_code == theirs.status_code == 202
    assert mine.json()["id"] != theirs.json()["id"]


def test_broker_down_leaves_the_audit_queued(settings: Settings, auth: dict[str, str], graph_id: str) -> None:
    app = create_app(settings.model_copy(update={"broker_url": "redis://127.0.0.1:1/0"}))
    with TestClient(app) as down_client:
        response = down_client.post("/v1/audits", headers=auth, json={"graph_id": graph_id})
        assert response.status_code == 202, response.text
        assert down_client.get(response.headers["location"], headers=auth).json()["state"] == "queued"


def test_cancel(client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]) -> None:
    audit_id = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"]
    response = client.post(f"/v1/audits/{audit_id}/cancel", headers=auth)
    assert response.status_code == 200
    assert response.json()["state"] == "cancelled" and response.json()["finished_at"] is not None
    assert client.post(f"/v1/audits/{audit_id}/cancel", headers=auth).json()["state"] == "cancelled"

    running = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"]
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(running)).values(state="running"))
    assert client.post(f"/v1/audits/{running}/cancel", headers=auth).json()["state"] == "cancelled"

    done = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"]
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(done)).values(state="succeeded"))
    assert_problem(client.post(f"/v1/audits/{done}/cancel", headers=auth), 409, "audit-finished")
    with sessions.begin() as session:
        assert session.scalar(select(Audit.state).where(Audit.id == uuid.UUID(done))) == "succeeded"


def test_failed_audit_shows_its_problem(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]
) -> None:
    audit_id = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"]
    problem = {"type": "https://bind-audit.dev/problems/audit-failed", "title": "Audit failed", "status": 500}
    with sessions.begin() as session:
        session.execute(
            update(Audit).where(Audit.id == uuid.UUID(audit_id)).values(state="failed", stage="training", error=problem)
        )
    audit = client.get(f"/v1/audits/{audit_id}", headers=auth).json()
    assert audit["state"] == "failed" and audit["error"] == problem and audit["stage"] == "training"


def test_tenant_isolation(client: TestClient, auth: dict[str, str], other_auth: dict[str, str], graph_id: str) -> None:
    audit_id = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"]
    assert_problem(client.get(f"/v1/audits/{audit_id}", headers=other_auth), 404, "audit-not-found")
    assert_problem(client.post(f"/v1/audits/{audit_id}/cancel", headers=other_auth), 404)
    assert_problem(client.get(f"/v1/audits/{audit_id}/influence", headers=other_auth), 404)
    assert client.get("/v1/audits", headers=other_auth).json()["items"] == []
    assert client.get(f"/v1/audits/{audit_id}", headers=auth).json()["state"] == "queued"


def test_list_filter_and_paginate(
    client: TestClient, auth: dict[str, str], graph_id: str, graph_npz: bytes, sessions: sessionmaker[Session]
) -> None:
    other_graph = client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", graph_npz)}).json()["id"]
    ids = [client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"] for _ in range(3)]
    extra = client.post("/v1/audits", headers=auth, json={"graph_id": other_graph}).json()["id"]
    client.post(f"/v1/audits/{ids[0]}/cancel", headers=auth)

    def listing(**params: Any) -> list[str]:
        out: list[str] = []
        token = None
        while True:
            query = params | {"limit": 2} | ({"page_token": token} if token else {})
            body = client.get("/v1/audits", headers=auth, params=query).json()
            out += [a["id"] for a in body["items"]]
            if (token := body["next_page_token"]) is None:
                return out

    assert listing() == [extra, *ids[::-1]]
    assert listing(graph_id=graph_id) == ids[::-1]
    assert listing(state="cancelled") == [ids[0]]
    assert listing(state="queued", graph_id=graph_id) == ids[:0:-1]
    assert_problem(client.get("/v1/audits", headers=auth, params={"state": "sleeping"}), 422)
    graphs_token = client.get("/v1/graphs", headers=auth, params={"limit": 1}).json()["next_page_token"]
    assert_problem(client.get("/v1/audits", headers=auth, params={"page_token": graphs_token}), 400)


def test_datasets_and_a_dataset_audit(settings: Settings, auth: dict[str, str], data_root: Path) -> None:
    """With the paper's data root, Income is listed as present and can be audited by name."""
    with TestClient(create_app(settings.model_copy(update={"data_root": data_root}))) as data_client:
        listed = {d["name"]: d for d in data_client.get("/v1/datasets", headers=auth).json()["items"]}
        assert listed["income"]["present"] is True
        response = data_client.post("/v1/audits", headers=auth, json={"dataset": "Income"})
        assert response.status_code == 202, response.text
        assert response.json()["dataset"] == "income" and response.json()["graph_id"] is None


def test_datasets_without_data_root(settings: Settings, auth: dict[str, str]) -> None:
    with TestClient(create_app(settings.model_copy(update={"data_root": None}))) as bare:
        assert bare.get("/v1/datasets", headers=auth).json() == {"items": []}
        problem = assert_problem(bare.post("/v1/audits", headers=auth, json={"dataset": "income"}), 422)
        assert "BIND_DATA_ROOT" in problem["detail"] and fields(problem) == {"dataset"}, problem
        schedule = {"dataset": "income", "interval_seconds": 3600}
        problem = assert_problem(bare.post("/v1/schedules", headers=auth, json=schedule), 422)
        assert "BIND_DATA_ROOT" in problem["detail"], problem


def test_non_finite_results_are_stored_as_null(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]
) -> None:
    """Postgres refuses NaN in JSON; the engine stores it (and ±inf) as null instead of failing the audit."""
    audit_id = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"]
    results = {"validation": {"pearson": float("nan"), "spearman": [1.0, float("inf")]}}
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(audit_id)).values(state="succeeded", results=results))
    stored = client.get(f"/v1/audits/{audit_id}", headers=auth).json()["results"]
    assert stored == {"validation": {"pearson": None, "spearman": [1.0, None]}}


def test_minibatch_training_settings(client: TestClient, auth: dict[str, str], graph_id: str) -> None:
    """Neighbour-sampled training is requested through the API; bind_core refuses what it cannot run."""
    body = {"graph_id": graph_id, "model": {"layers": 2}, "training": {"batch_size": 64, "fan_out": [10, -1]}}
    response = client.post("/v1/audits", headers=auth, json=body)
    assert response.status_code == 202, response.text
    training = response.json()["config"]["training"]
    assert training["batch_size"] == 64 and training["fan_out"] == [10, -1]
    gat = {**body, "model": {"arch": "gat", "layers": 2}}
    assert assert_problem(client.post("/v1/audits", headers=auth, json=gat), 422)["type"].endswith("/invalid-config")
    wrong = {**body, "training": {"batch_size": 64, "fan_out": [10, 10, 10]}}  # three entries for two layers
    assert assert_problem(client.post("/v1/audits", headers=auth, json=wrong), 422)["type"].endswith("/invalid-config")


def test_an_audits_own_gat_may_be_a_gatv2_with_residual_connections(
    client: TestClient, auth: dict[str, str], graph_id: str
) -> None:
    body = {"graph_id": graph_id, "model": {"arch": "gat", "v2": True, "residual": True, "heads": 2, "hidden": 8}}
    response = client.post("/v1/audits", headers=auth, json=body)
    assert response.status_code == 202, response.text
    model = response.json()["config"]["model"]
    assert (model["arch"], model["v2"], model["residual"], model["share_weights"]) == ("gat", True, True, False)
    gcn = {"graph_id": graph_id, "model": {"arch": "gcn", "v2": True}}
    problem = assert_problem(client.post("/v1/audits", headers=auth, json=gcn), 422, "invalid-config")
    assert "v2: only for a GAT" in problem["detail"]


def test_an_audits_own_sage_may_normalise_its_layers_outputs(
    client: TestClient, auth: dict[str, str], graph_id: str
) -> None:
    body = {"graph_id": graph_id, "model": {"arch": "sage", "normalize": True}}
    response = client.post("/v1/audits", headers=auth, json=body)
    assert response.status_code == 202, response.text
    model = response.json()["config"]["model"]
    assert (model["arch"], model["normalize"]) == ("sage", True)
    gcn = {"graph_id": graph_id, "model": {"arch": "gcn", "normalize": True}}
    problem = assert_problem(client.post("/v1/audits", headers=auth, json=gcn), 422, "invalid-config")
    assert "normalize: only for a SAGE" in problem["detail"]
