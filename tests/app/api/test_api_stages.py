"""``stages`` of ``POST /v1/audits`` (as the command line's ``--skip``): accepted, checked, stored in order."""

from __future__ import annotations

from typing import Any

import pytest
from apihelp import assert_problem, fields
from fastapi.testclient import TestClient

from app.audits.schemas import STAGE_ORDER
from bind_core.pipeline.config import STAGES


def test_the_request_names_bind_cores_stages() -> None:
    assert STAGE_ORDER == STAGES


def test_stages_are_accepted_and_stored_in_order(client: TestClient, auth: dict[str, str], graph_id: str) -> None:
    body = {"graph_id": graph_id, "stages": ["influence", "training"]}  # was 422 "Extra inputs are not permitted"
    response = client.post("/v1/audits", headers=auth, json=body)
    assert response.status_code == 202, response.text
    assert response.json()["config"]["stages"] == ["training", "metrics", "influence"]
    default = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id, "lam": 0.25}).json()
    assert default["config"]["stages"] == list(STAGES)
    schema = client.get("/openapi.json").json()["components"]["schemas"]["AuditCreate"]["properties"]["stages"]
    assert schema["items"]["enum"] == list(STAGES)


@pytest.mark.parametrize(
    ("stages", "field", "message"),
    [
        (["metrics", "debiasing"], "stages", "debiasing needs influence"),
        (["training", "validation"], "stages", "validation needs influence"),
        (["influence", "influence"], "stages", "name each stage once"),
        (["stability"], "stages.0", "'training', 'metrics', 'influence', 'debiasing' or 'validation'"),
        ("influence", "stages", "valid list"),
    ],
)
def test_bad_stages_are_422_naming_them(
    client: TestClient, auth: dict[str, str], graph_id: str, stages: Any, field: str, message: str
) -> None:
    response = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id, "stages": stages})
    problem = assert_problem(response, 422)
    assert fields(problem) == {field} and message in problem["errors"][0]["message"]


def test_a_schedule_takes_stages_too(client: TestClient, auth: dict[str, str]) -> None:
    body = {"dataset": "income", "interval_seconds": 86400, "audit": {"stages": ["debiasing"]}}
    assert fields(assert_problem(client.post("/v1/schedules", headers=auth, json=body), 422)) == {"audit.stages"}
