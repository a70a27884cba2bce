"""Edge debiasing through the API: ``POST /v1/audits`` takes ``edge_budgets`` (fractions in (0, 1]) into the stored
config, refuses others with 422, and the results schema names the section's ``debiasing`` rows."""

from __future__ import annotations

from apihelp import assert_problem
from fastapi.testclient import TestClient


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
