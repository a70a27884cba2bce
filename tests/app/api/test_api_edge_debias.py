"""Edge debiasing through the API: ``POST /v1/audits`` takes ``edge_budgets`` (fractions in (0, 1]) into the stored
config, refuses others with 422, the results schema names the section's ``debiasing`` rows, and the stored rows
read back (GET, the export) as the library typed them."""

from __future__ import annotations

import json
import uuid
from typing import Any

from apihelp import assert_problem
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.audits.repository import Claim, succeed
from app.core.db.tables import Audit
from app.core.lease import Lease
from bind_core.data.datasets import synthetic
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.pipeline.results import AuditResults

FAST: dict[str, Any] = {"training": {"epochs": 30}, "bootstrap": 0, "validation_sample": 0, "budgets": []}


def test_the_request_takes_edge_budgets(client: TestClient, auth: dict[str, str], graph_id: str) -> None:
    body = {"graph_id": graph_id, "edges": True, "debias_seeds": [1, 10, 100], "edge_budgets": [0.005, 0.02]}
    created = client.post("/v1/audits", headers=auth, json=body)
    assert created.status_code in (201, 202), created.text
    audit = client.get(f"/v1/audits/{created.json()['id']}", headers=auth).json()
    assert audit["config"]["edge_budgets"] == [0.005, 0.02] and audit["config"]["debias_seeds"] == [1, 10, 100]
    plain = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()
    assert plain["config"]["edge_budgets"] == [0.0025, 0.01]
    for bad in ([0], [1.5], ["a"]):
        assert_problem(client.post("/v1/audits", headers=auth, json={**body, "edge_budgets": bad}), 422)


def test_the_results_schema_types_the_edge_debiasing(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    section = schemas["AuditEdgeAttribution"]["properties"]
    assert {"debiasing", "debiasing_reason"} <= set(section)
    row = schemas["AuditEdgeDebiasingRow"]["properties"]
    assert {"budget", "requested", "deleted", "estimated", "caveat", "cross_group", "before", "after"} <= set(row)
    assert {"selected", "random", "advantage", "yardstick", "beats_random", "reduces_bias", "verdict"} <= set(row)
    assert "budgets" in schemas["AuditEdgeDebiasing"]["properties"]


def test_the_stored_edge_debiasing_reads_back_as_the_library_typed_it(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]
) -> None:
    """An audit asked through the API with edges, debias seeds and edge budgets, run by the library on the config
    the API stored, written by the worker's own `succeed`: GET and the export give back the same debiasing rows."""
    body = {"graph_id": graph_id, **FAST, "edges": True, "debias_seeds": [1, 2, 3], "edge_budgets": [0.05, 0.2]}
    created = client.post("/v1/audits", headers=auth, json=body)
    assert created.status_code in (201, 202), created.text
    audit_id = created.json()["id"]
    config = AuditConfig.from_dict(client.get(f"/v1/audits/{audit_id}", headers=auth).json()["config"])
    assert list(config.edge_budgets) == [0.05, 0.2] and list(config.debias_seeds) == [1, 2, 3]
    result = run_audit(synthetic(80, seed=0, train_per_class=15), config)
    typed = AuditResults.from_dict(json.loads(json.dumps(result.to_dict())))
    assert typed.edges is not None and typed.edges.debiasing is not None
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(audit_id)).values(state="running", attempts=1))
        claim = Claim(uuid.UUID(audit_id), 1, None, None, {})
        lease = succeed(session, claim, results=typed.to_dict(), weights=None, model_config=None,
                        influence=result.influence_rows(), edges=result.edge_rows())  # fmt: skip
        assert lease is Lease.HELD
    audit = client.get(f"/v1/audits/{audit_id}", headers=auth).json()
    assert audit["state"] == "succeeded"
    stored = audit["results"]["edges"]["debiasing"]
    expected = typed.edges.debiasing
    assert [r["budget"] for r in stored["budgets"]] == [r.budget for r in expected.budgets] == [0.05, 0.2]
    assert [r["deleted"] for r in stored["budgets"]] == [r.deleted for r in expected.budgets]
    assert all(r.deleted > 0 for r in expected.budgets)
    assert [r["verdict"] for r in stored["budgets"]] == [r.verdict for r in expected.budgets]
    assert [r["advantage"] for r in stored["budgets"]] == [r.advantage for r in expected.budgets]
    assert stored["pool"] == expected.pool and stored["baselines"] == expected.baselines
    read_back = AuditResults.from_dict(audit["results"]).edges
    assert read_back is not None and read_back.debiasing == expected
    export = client.get(f"/v1/audits/{audit_id}/export", headers=auth)
    assert export.status_code == 200 and export.json()["edges"]["debiasing"] == stored
