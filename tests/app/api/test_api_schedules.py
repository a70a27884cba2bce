"""``/v1/schedules``: validation, pause and resume, delete, an empty run history, and the history report."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from apihelp import assert_problem, fields
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Audit, Schedule


@pytest.mark.usefixtures("graph_id")  # the graph "g"
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


@pytest.mark.usefixtures("graph_id")
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


def test_a_graph_name_with_no_graph_is_422_as_for_an_audit(
    client: TestClient, auth: dict[str, str], other_auth: dict[str, str], graph_npz: bytes
) -> None:
    """Was 201, and every slot's audit then failed at once with ``graph-not-found``: the name is checked when the
    schedule is made, with the answer ``POST /v1/audits`` gives for the same name."""
    body = {"graph_name": "nosuch", "interval_seconds": 86400}
    refused = assert_problem(client.post("/v1/schedules", headers=auth, json=body), 422, "validation-error")
    audit = assert_problem(client.post("/v1/audits", headers=auth, json={"graph_name": "nosuch"}), 422)
    assert refused["errors"] == audit["errors"] == [{"field": "graph_name", "message": "no graph of that name"}]
    assert refused["detail"] == "No graph named 'nosuch'."
    theirs = client.post("/v1/graphs", headers=other_auth, files={"npz": ("nosuch.npz", graph_npz)})
    assert theirs.status_code == 201 and theirs.json()["name"] == "nosuch"  # another tenant's graph of that name
    assert fields(assert_problem(client.post("/v1/schedules", headers=auth, json=body), 422)) == {"graph_name"}
    assert client.get("/v1/schedules", headers=auth).json()["items"] == []

    # A graph deleted after its schedule was made leaves the schedule as it was (its slots' audits then fail with
    # graph-not-found: tests/integration/test_schedules.py).
    mine = client.post("/v1/graphs", headers=auth, files={"npz": ("kept.npz", graph_npz)}).json()
    made = client.post("/v1/schedules", headers=auth, json=body | {"graph_name": "kept"})
    assert made.status_code == 201, made.text
    url = f"/v1/schedules/{made.json()['id']}"
    assert client.post(url + "/pause", headers=auth).json()["state"] == "paused"  # nothing active for a shared database
    assert client.delete(f"/v1/graphs/{mine['id']}", headers=auth).status_code == 204
    assert client.get(url, headers=auth).json()["graph_name"] == "kept"
    assert client.post(url + "/resume", headers=auth).json()["state"] == "active"
    assert client.post(url + "/pause", headers=auth).json()["state"] == "paused"


@pytest.mark.parametrize(
    ("cron", "why"),
    [
        ("0 3 31 2 *", "never fires: Feb 31 does not exist"),
        ("0 0 30 2 *", "never fires: Feb 30 does not exist"),
        ("0 0 31 4,6 *", "never fires: Apr 31 and Jun 31 do not exist"),
    ],
)
@pytest.mark.usefixtures("graph_id")
def test_a_cron_that_never_fires_is_422(
    client: TestClient, auth: dict[str, str], sessions: sessionmaker[Session], cron: str, why: str
) -> None:
    """Was a 500 (``CroniterBadDateError`` from ``shortest_cron_gap``); resuming a stored one was too."""
    problem = assert_problem(client.post("/v1/schedules", headers=auth, json={"graph_name": "g", "cron": cron}), 422)
    assert problem["errors"] == [{"field": "cron", "message": why}]
    made = client.post("/v1/schedules", headers=auth, json={"graph_name": "g", "cron": "0 3 28 2 *"}).json()
    client.post(f"/v1/schedules/{made['id']}/pause", headers=auth)
    with sessions.begin() as session:
        session.get_one(Schedule, uuid.UUID(made["id"])).cron = cron  # stored before creation refused it
    resumed = client.post(f"/v1/schedules/{made['id']}/resume", headers=auth)
    assert fields(assert_problem(resumed, 422)) == {"cron"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"interval_seconds": True}, "interval_seconds"),  # was accepted as 1 second
        ({"interval_seconds": "60"}, "interval_seconds"),
        ({"interval_seconds": 60, "thresholds": {"delta_sp": True}}, "thresholds.delta_sp"),
        ({"interval_seconds": 60, "thresholds": {"gamma": "0.1"}}, "thresholds.gamma"),
        ({"interval_seconds": 60, "thresholds": {"delta_eo": float("inf")}}, "thresholds.delta_eo"),
        ({"interval_seconds": 60, "audit": {"training": {"epochs": True}}}, "audit.training.epochs"),
    ],
)
def test_strict_json_types(client: TestClient, auth: dict[str, str], body: dict[str, Any], field: str) -> None:
    content = json.dumps({"graph_name": "g"} | body)  # writes inf as Infinity, which the server's parser reads
    headers = auth | {"Content-Type": "application/json"}
    response = client.post("/v1/schedules", headers=headers, content=content)
    assert fields(assert_problem(response, 422)) == {field}


@pytest.mark.usefixtures("graph_id")
def test_schedule_report_page(
    client: TestClient, auth: dict[str, str], other_auth: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    """``GET /v1/schedules/{id}/report``: the runs' metrics over time as HTML, tenant-isolated."""
    body = {"graph_name": "g", "interval_seconds": 86400, "thresholds": {"delta_sp": 0.1}}
    schedule = client.post("/v1/schedules", headers=auth, json=body).json()
    url = f"/v1/schedules/{schedule['id']}/report"
    client.post(f"/v1/schedules/{schedule['id']}/pause", headers=auth)  # nothing active for a shared database
    empty = client.get(url, headers=auth)
    assert empty.status_code == 200 and "No run yet" in empty.text and "<svg" not in empty.text

    start = datetime(2026, 11, 1, 3, tzinfo=UTC)
    with sessions.begin() as session:
        row = session.get(Schedule, uuid.UUID(schedule["id"]))
        assert row is not None
        for day, (state, sp) in enumerate([("succeeded", 0.05), ("failed", None), ("succeeded", 0.25)]):
            test = {"accuracy": 0.9 - day / 100, "delta_sp": sp, "delta_eo": 0.02, "gamma": 0.01}
            session.add(
                Audit(
                    tenant_id=row.tenant_id, dataset="toy", config={}, request_hash=f"{day}" * 64, state=state,
                    schedule_id=row.id, slot_time=start + timedelta(days=day), graph_version=1,
                    results={"metrics": {"test": test}} if state == "succeeded" else None,
                )
            )  # fmt: skip
    response = client.get(url, headers=auth)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in response.headers["content-security-policy"]
    page = response.text
    assert page.startswith("<!DOCTYPE html>") and f"<title>BIND schedule {schedule['id']}</title>" in page
    assert page.count("<svg") == 1 and "<script" not in page and "ΔSP threshold 0.1" in page
    assert "<span class=breach>▲ 0.250</span>" in page and "ΔSP 0.250 &gt; 0.100" in page  # the third run crossed
    assert page.index("2026-11-03 03:00:00") < page.index("2026-11-01 03:00:00")  # newest first
    assert ">failed<" in page and "0.880" in page  # the latest accuracy
    limited = client.get(url + "?limit=1", headers=auth).text
    assert "2026-11-03 03:00:00" in limited and "2026-11-01 03:00:00" not in limited
    assert_problem(client.get(url + "?limit=0", headers=auth), 422)
    assert_problem(client.get(url), 401, "unauthorized")
    assert_problem(client.get(url, headers=other_auth), 404, "schedule-not-found")
    assert_problem(client.get(f"/v1/schedules/{uuid.uuid4()}/report", headers=auth), 404, "schedule-not-found")
    responses = client.get("/openapi.json").json()["paths"]["/v1/schedules/{schedule_id}/report"]["get"]["responses"]
    assert "text/html" in responses["200"]["content"] and "404" in responses


def test_runs_a_page_at_a_time(
    client: TestClient, auth: dict[str, str], sessions: sessionmaker[Session], graph_id: str
) -> None:
    """A long history (an hourly schedule for a year is 8,760 runs) is read a page at a time, newest slot first, each
    run once; a token of another listing is a 400."""
    body = {"graph_name": "g", "interval_seconds": 3600}
    schedule = client.post("/v1/schedules", headers=auth, json=body).json()
    client.post(f"/v1/schedules/{schedule['id']}/pause", headers=auth)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    with sessions.begin() as session:
        row = session.get(Schedule, uuid.UUID(schedule["id"]))
        assert row is not None
        for hour in range(5):
            session.add(
                Audit(
                    tenant_id=row.tenant_id, dataset="toy", config={}, request_hash=f"{hour}" * 64, state="failed",
                    schedule_id=row.id, slot_time=start + timedelta(hours=hour), graph_version=1,
                )
            )  # fmt: skip
    url = f"/v1/schedules/{schedule['id']}/runs"
    seen: list[str] = []
    token = None
    while True:
        page = client.get(url, headers=auth, params={"limit": 2, **({"page_token": token} if token else {})}).json()
        seen += [r["slot_time"] for r in page["items"]]
        token = page["next_page_token"]
        if token is None:
            break
    assert [datetime.fromisoformat(s) for s in seen] == [start + timedelta(hours=h) for h in (4, 3, 2, 1, 0)]
    graphs_token = client.get("/v1/graphs", headers=auth, params={"limit": 1}).json()["next_page_token"]
    if graphs_token:
        assert_problem(client.get(url, headers=auth, params={"page_token": graphs_token}), 400, "invalid-page-token")
    assert_problem(client.get(url, headers=auth, params={"page_token": "x"}), 400, "invalid-page-token")
