"""A stored succeeded audit is served as stored and conforms to ``/openapi.json`` (issue 17): its ``GET`` and its
export validate against the declared response schemas (``jsonschema``; schemathesis's response checks on such an
audit are in ``tests/security/test_fuzz_openapi.py``), results
of an older format are still served, and a stored document that fits no model is served as it is, never a 500."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Audit
from bind_core.data.datasets import synthetic
from bind_core.pipeline.audit import AuditConfig, run_audit


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    """A tiny real audit with every stage: intervals, debiasing with the check against chance, validation,
    stability; as stored (JSON)."""
    config = AuditConfig.from_dict(
        {
            "training": {"epochs": 20}, "bootstrap": 30, "validation_sample": 2, "budgets": [0.05],
            "debias_seeds": [1, 2, 3], "debias_random_sets": 1, "stability_seeds": [10, 11], "stability_k": 4,
        }
    )  # fmt: skip
    doc: dict[str, Any] = json.loads(
        json.dumps(run_audit(synthetic(100, seed=1, train_per_class=15), config).to_dict())
    )
    return doc


def _store(client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session], doc: Any) -> str:
    audit_id = str(client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"])
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(audit_id)).values(state="succeeded", results=doc))
    return audit_id


def _validator(client: TestClient, path: str, status: str = "200") -> Draft202012Validator:
    """The declared response schema of ``GET path`` as a JSON Schema (2020-12, OpenAPI 3.1's dialect)."""
    spec = client.get("/openapi.json").json()
    schema = spec["paths"][path]["get"]["responses"][status]["content"]["application/json"]["schema"]
    return Draft202012Validator({**schema, "components": spec["components"]})


def _errors(validator: Draft202012Validator, body: Any) -> list[str]:
    """Every error, those inside ``anyOf`` branches included, as ``path: message``."""
    out: list[str] = []
    stack = list(validator.iter_errors(body))
    while stack:
        error = stack.pop()
        out.append(f"{'/'.join(map(str, error.absolute_path))}: {error.message}")
        stack.extend(error.context or [])
    return out


def test_a_stored_audit_is_served_as_stored_and_conforms(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session], results: dict[str, Any]
) -> None:
    audit_id = _store(client, auth, graph_id, sessions, results)
    response = client.get(f"/v1/audits/{audit_id}", headers=auth)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["results"] == results  # nothing added, dropped or changed
    assert json.dumps(body["results"], sort_keys=True) == json.dumps(results, sort_keys=True)  # not even 3 → 3.0
    assert results["debiasing"][0]["against_random"]["verdict"] and results["validation"]["count"] == 2
    assert _errors(_validator(client, "/v1/audits/{audit_id}"), body) == []
    export = client.get(f"/v1/audits/{audit_id}/export", headers=auth)
    assert export.status_code == 200, export.text
    assert export.json()["influence"]["top_harmful"] == results["top_harmful"]
    assert _errors(_validator(client, "/v1/audits/{audit_id}/export"), export.json()) == []


def test_what_the_worker_adds_is_served_and_conforms(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session], results: dict[str, Any]
) -> None:
    """A supplied model's record, a distributed estimate's spread and ``stationary: "kinks"``."""
    doc = copy.deepcopy(results)
    doc["stationarity"] |= {"stationary": "kinks", "kinks": {"directions": 3}}
    doc["supplied_model"] = {"id": str(uuid.uuid4()), "polished_by_service": False, "grad_norm": 1e-9}
    worker = {"worker": "w1", "device": "cpu", "chunks": 2, "nodes": 30, "seconds": 0.5}
    doc["influence_summary"]["distributed"] = {"chunks": 2, "coordinator": "w1", "workers": [worker], "reclaimed": 0}
    audit_id = _store(client, auth, graph_id, sessions, doc)
    body = client.get(f"/v1/audits/{audit_id}", headers=auth).json()
    assert body["results"] == doc
    assert _errors(_validator(client, "/v1/audits/{audit_id}"), body) == []


def test_the_schema_check_catches_a_wrong_result(client: TestClient, results: dict[str, Any]) -> None:
    """The check above can fail: a results document with a string for a count does not validate."""
    validator = _validator(client, "/v1/audits/{audit_id}")
    wrong = copy.deepcopy(results)
    wrong["metrics"]["test"]["nodes"] = "many"
    wrong["debiasing"][0]["against_random"]["beats_random"] = "yes"
    body = {"results": wrong}
    paths = {e.split(":")[0] for e in _errors(validator, body)}
    assert {"results/metrics/test/nodes", "results/debiasing/0/against_random/beats_random"} <= paths


def test_older_and_unfitting_results_are_still_served(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session], results: dict[str, Any]
) -> None:
    older = copy.deepcopy(results)
    for key in ("stationarity", "refinement", "top_helpful", "sign_convention"):  # keys added over time
        del older[key]
    del older["debiasing"][0]["against_random"]
    older["metrics"]["test"]["legacy_metric"] = 0.5  # a key a later version dropped
    unfitting = {"metrics": "not an object", "warnings": [1, 2]}
    for doc in (older, unfitting):
        audit_id = _store(client, auth, graph_id, sessions, doc)
        response = client.get(f"/v1/audits/{audit_id}", headers=auth)
        assert response.status_code == 200, response.text
        assert response.json()["results"] == doc
        if doc is older:  # every key is optional and unnamed keys are allowed: an older document conforms
            assert _errors(_validator(client, "/v1/audits/{audit_id}"), response.json()) == []
    listed = client.get("/v1/audits", headers=auth)
    assert listed.status_code == 200


def test_a_failed_audit_serves_its_problem_as_stored(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]
) -> None:
    problem = {
        "type": "https://bind-audit.dev/problems/invalid-graph", "title": "Invalid graph", "status": 422,
        "detail": "bad", "instance": "/v1/audits/x", "errors": [{"field": "nodes", "message": "no label"}],
        "limits": [{"limit": "memory", "allowed": 1, "estimated": 2, "excess": 1}],
    }  # fmt: skip
    audit_id = str(client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"])
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(audit_id)).values(state="failed", error=problem))
    body = client.get(f"/v1/audits/{audit_id}", headers=auth).json()
    assert body["error"] == problem  # no null added to the field error, the problem's own members kept
    assert _errors(_validator(client, "/v1/audits/{audit_id}"), body) == []
