"""``budgets`` of ``POST /v1/audits``: a count is at most the graph's training nodes (it was cut to them, silently)."""

from __future__ import annotations

from apihelp import assert_problem, fields
from fastapi.testclient import TestClient


def test_a_count_over_the_training_set_is_422_naming_budgets(
    client: TestClient, auth: dict[str, str], graph_id: str
) -> None:
    train = client.get(f"/v1/graphs/{graph_id}", headers=auth).json()["summary"]["train"]
    for budgets in ([1e20], [0.1, 1_000_000], [train + 1]):  # each was 202, then "requested <train>"
        problem = assert_problem(
            client.post("/v1/audits", headers=auth, json={"graph_id": graph_id, "budgets": budgets}), 422
        )
        assert fields(problem) == {"budgets"} and f"more than the {train} training nodes" in problem["detail"]
    fine = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id, "budgets": [0.5, train]})
    assert fine.status_code == 202, fine.text
    skipped = {"graph_id": graph_id, "budgets": [1e20], "stages": ["training", "metrics", "influence"]}
    assert client.post("/v1/audits", headers=auth, json=skipped).status_code == 202  # no debiasing: not read
