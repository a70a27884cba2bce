"""``/v1/schedules``: validation, pause and resume, delete, and an empty run history."""

from __future__ import annotations

from apihelp import assert_problem, fields
from fastapi.testclient import TestClient


def test_schedule_lifecycle(client: TestClient, auth: dict[str, str], other_auth: dict[str, str]) -> None:
    body = {"graph_name": "g", "audit": {"training": {"epochs": 5}}, "interval_seconds": 3600,
            "thresholds": {"delta_sp": 0.1}}  # fmt: skip
    created = client.post("/v1/schedules", headers=auth, json=body)
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert created.headers["Location"] == f"/v1/schedules/{schedule['id']}"
    assert (schedule["state"], schedule["thresholds"], schedule["cron"]) == ("active", {"delta_sp": 0.1}, None)
    url = f"/v1/schedules/{schedule['id']}"
    assert client.post(url + "/pause", headers=auth).json()["state"] == "paused"
    assert client.post(url + "/resume", headers=auth).json()["state"] == "active"
    assert client.get(url + "/runs", headers=auth).json()["items"] == []
    assert [s["id"] for s in client.get("/v1/schedules", headers=auth).json()["items"]] == [schedule["id"]]
    assert_problem(client.get(url, headers=other_auth), 404, "schedule-not-found")
    assert client.delete(url, headers=auth).status_code == 204
    assert_problem(client.get(url, headers=auth), 404)


def test_cron_and_bad_schedules(client: TestClient, auth: dict[str, str]) -> None:
    cron = client.post("/v1/schedules", headers=auth, json={"graph_name": "g", "cron": "*/5 * * * *"})
    assert cron.status_code == 201, cron.text
    assert cron.json()["next_run_at"].split(":")[1] in {f"{m:02d}" for m in range(0, 60, 5)}
    bad_cron = client.post("/v1/schedules", headers=auth, json={"graph_name": "g", "cron": "every day"})
    assert fields(assert_problem(bad_cron, 422)) == {"cron"}
    both = client.post(
        "/v1/schedules", headers=auth, json={"graph_name": "g", "cron": "* * * * *", "interval_seconds": 5}
    )
    assert_problem(both, 422)
    source = client.post("/v1/schedules", headers=auth,
                         json={"graph_name": "g", "interval_seconds": 5, "audit": {"graph_id": None}})  # fmt: skip
    assert fields(assert_problem(source, 422)) == {"audit.graph_id"}
    setting = client.post("/v1/schedules", headers=auth,
                          json={"graph_name": "g", "interval_seconds": 5, "audit": {"budgets": [-1]}})  # fmt: skip
    assert_problem(setting, 422)
    threshold = client.post("/v1/schedules", headers=auth,
                            json={"graph_name": "g", "interval_seconds": 5, "thresholds": {"auc": 1}})  # fmt: skip
    assert_problem(threshold, 422)
    # Leave nothing active for a worker that might share this database.
    client.post(f"/v1/schedules/{cron.json()['id']}/pause", headers=auth)
