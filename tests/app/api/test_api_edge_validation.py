"""The edge self-check through the API: ``POST /v1/audits`` takes ``edge_validation_sample`` (a non-negative
integer, as ``validation_sample``) into the stored config, refuses others with 422, and the results schema types the
``edges`` section's ``validation`` (``AuditEdgeValidation``) and ``validation_reason``."""

from __future__ import annotations

from apihelp import assert_problem
from fastapi.testclient import TestClient


def test_the_request_takes_the_edge_sample(client: TestClient, auth: dict[str, str], graph_id: str) -> None:
    body = {"graph_id": graph_id, "edges": True, "edge_validation_sample": 7}
    created = client.post("/v1/audits", headers=auth, json=body)
    assert created.status_code in (201, 202), created.text
    audit = client.get(f"/v1/audits/{created.json()['id']}", headers=auth).json()
    assert audit["config"]["edge_validation_sample"] == 7
    plain = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()
    assert plain["config"]["edge_validation_sample"] == 30
    off = client.post("/v1/audits", headers=auth, json={**body, "edge_validation_sample": 0})
    assert off.status_code in (201, 202), off.text
    for bad in (-1, 10_001, 1.5, "3", True):
        assert_problem(client.post("/v1/audits", headers=auth, json={**body, "edge_validation_sample": bad}), 422)


def test_the_results_schema_types_the_edge_self_check(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert {"validation", "validation_reason"} <= set(schemas["AuditEdgeAttribution"]["properties"])
    check = schemas["AuditEdgeValidation"]["properties"]
    assert {"ground_truth", "sample", "affecting", "count", "pearson", "spearman", "slope"} <= set(check)
    assert {"noise_floor", "clear_of_noise", "seconds", "points", "undefined"} <= set(check)
    assert {"u", "v", "u_id", "v_id", "estimated", "actual"} <= set(schemas["AuditEdgeValidationPoint"]["properties"])
    assert "edge_validation_sample" in schemas["AuditCreate"]["properties"]
