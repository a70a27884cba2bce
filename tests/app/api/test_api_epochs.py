"""``training.epochs`` of ``POST /v1/audits``: 0 to ``MAX_EPOCHS``, as ``bind-audit run --epochs`` takes it."""

from __future__ import annotations

from apihelp import assert_problem, fields
from fastapi.testclient import TestClient

from bind_core.training.settings import MAX_EPOCHS


def test_zero_epochs_is_the_polish_alone(client: TestClient, auth: dict[str, str], graph_id: str) -> None:
    response = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id, "training": {"epochs": 0}})
    assert response.status_code == 202, response.text  # was 422 (1-100000) while the command line ran it
    assert response.json()["config"]["training"]["epochs"] == 0


def test_epochs_out_of_range_or_untrained_are_422(client: TestClient, auth: dict[str, str], graph_id: str) -> None:
    for training in ({"epochs": -1}, {"epochs": MAX_EPOCHS + 1}, {"epochs": 0, "polish": False}):
        body = {"graph_id": graph_id, "training": training}
        problem = assert_problem(client.post("/v1/audits", headers=auth, json=body), 422)
        assert fields(problem) == {"training.epochs"}, problem
    adam = {"graph_id": graph_id, "training": {"epochs": 0}, "debias_retrain": "adam"}
    assert "debias_retrain: adam" in assert_problem(client.post("/v1/audits", headers=auth, json=adam), 422)["detail"]
    schema = client.get("/openapi.json").json()["components"]["schemas"]["TrainingSettings"]["properties"]["epochs"]
    assert (schema["minimum"], schema["maximum"]) == (0, MAX_EPOCHS) and "polish alone" in schema["description"]
