"""The audit trail: a scripted sequence of actions leaves exactly one entry per action (succeeded, denied or failed;
plain reads none), ``/v1/events`` pages and filters it, exports it as JSON lines, and the application's own database
connection cannot change or delete an entry (Postgres: a trigger refuses)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta

import pytest
from apihelp import assert_problem
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import ApiKey
from app.tenants.keys import create_api_key, find_key

Entry = tuple[str, str | None, str, str]
"""``(action, target, outcome, actor role)`` of one expected entry."""


class Team:
    """One tenant with a key of each role (``headers[role]``) and the keys' ids."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        name = f"trail-{uuid.uuid4().hex[:10]}"
        with sessions.begin() as session:
            keys = {"admin": create_api_key(session, name)}
            keys |= {role: create_api_key(session, name, role) for role in ("viewer", "auditor")}
            rows = {role: find_key(session, key) for role, key in keys.items()}
        self.headers = {role: {"Authorization": f"Bearer {key}"} for role, key in keys.items()}
        self.key_ids = {role: row.id for role, row in rows.items() if row is not None}
        self.tenant_id = next(r.tenant_id for r in rows.values() if r is not None)


@pytest.fixture
def team(sessions: sessionmaker[Session]) -> Team:
    return Team(sessions)


def all_events(client: TestClient, team: Team, **query: str) -> list[dict[str, object]]:
    """Every entry ``/v1/events`` lists for the query, oldest first, fetched three per page."""
    items: list[dict[str, object]] = []
    params: dict[str, str] = {"limit": "3", **query}
    while True:
        page = client.get("/v1/events", headers=team.headers["admin"], params=params)
        assert page.status_code == 200, page.text
        items += page.json()["items"]
        token = page.json()["next_page_token"]
        if token is None:
            return items[::-1]
        params["page_token"] = token


def test_a_scripted_sequence_leaves_one_entry_per_action(client: TestClient, team: Team, graph_npz: bytes) -> None:
    h = team.headers
    expected: list[Entry] = []

    def did(response_status: int, got: int, entry: Entry) -> None:
        assert got == response_status
        expected.append(entry)

    graph = client.post("/v1/graphs", headers=h["auditor"], files={"npz": ("g.npz", graph_npz)})
    gid = graph.json()["id"]
    did(201, graph.status_code, ("graph.upload", f"/graphs/{gid}", "succeeded", "auditor"))
    assert client.get("/v1/graphs", headers=h["viewer"]).status_code == 200  # a plain read: no entry
    assert client.get(f"/v1/graphs/{gid}", headers=h["viewer"]).status_code == 200
    audit = client.post("/v1/audits", headers=h["auditor"], json={"graph_id": gid})
    aid = audit.json()["id"]
    did(202, audit.status_code, ("audit.create", f"/audits/{aid}", "succeeded", "auditor"))
    cancel = client.post(f"/v1/audits/{aid}/cancel", headers=h["viewer"])
    did(403, cancel.status_code, ("audit.cancel", f"/audits/{aid}", "denied", "viewer"))
    cancel = client.post(f"/v1/audits/{aid}/cancel", headers=h["auditor"])
    did(200, cancel.status_code, ("audit.cancel", f"/audits/{aid}", "succeeded", "auditor"))
    report = client.get(f"/v1/audits/{aid}/report", headers=h["viewer"])
    did(409, report.status_code, ("report.read", f"/audits/{aid}", "failed", "viewer"))
    csv = client.get(f"/v1/audits/{aid}/influence.csv", headers=h["viewer"])
    did(409, csv.status_code, ("export.influence_csv", f"/audits/{aid}", "failed", "viewer"))
    schedule = client.post("/v1/schedules", headers=h["auditor"], json={"graph_name": "g", "interval_seconds": 3600})
    sid = schedule.json()["id"]
    did(201, schedule.status_code, ("schedule.create", f"/schedules/{sid}", "succeeded", "auditor"))
    pause = client.post(f"/v1/schedules/{sid}/pause", headers=h["auditor"])
    did(200, pause.status_code, ("schedule.pause", f"/schedules/{sid}", "succeeded", "auditor"))
    gone = client.delete(f"/v1/schedules/{sid}", headers=h["admin"])
    did(204, gone.status_code, ("schedule.delete", f"/schedules/{sid}", "succeeded", "admin"))
    hook_body = {"url": "https://8.8.8.8/h", "events": ["audit.failed"]}
    hook = client.post("/v1/webhooks", headers=h["admin"], json=hook_body)
    did(201, hook.status_code, ("webhook.create", f"/webhooks/{hook.json()['id']}", "succeeded", "admin"))
    key = client.post("/v1/keys", headers=h["admin"], json={"role": "viewer"})
    kid = key.json()["id"]
    did(201, key.status_code, ("key.create", f"/keys/{kid}", "succeeded", "admin"))
    rotated = client.post(f"/v1/keys/{kid}/rotate", headers=h["admin"])
    did(201, rotated.status_code, ("key.rotate", f"/keys/{kid}", "succeeded", "admin"))
    revoke = client.post(f"/v1/keys/{kid}/revoke", headers=h["admin"])
    did(409, revoke.status_code, ("key.revoke", f"/keys/{kid}", "failed", "admin"))  # rotating revoked it
    purge = client.delete(f"/v1/graphs/{gid}", headers=h["auditor"], params={"purge": "true"})
    did(403, purge.status_code, ("graph.purge", f"/graphs/{gid}", "denied", "auditor"))
    erase = client.delete(f"/v1/audits/{aid}", headers=h["admin"])
    did(204, erase.status_code, ("audit.delete", f"/audits/{aid}", "succeeded", "admin"))
    purge = client.delete(f"/v1/graphs/{gid}", headers=h["admin"], params={"purge": "true"})
    did(204, purge.status_code, ("graph.purge", f"/graphs/{gid}", "succeeded", "admin"))
    missing = client.delete(f"/v1/graphs/{gid}", headers=h["admin"])
    did(404, missing.status_code, ("graph.delete", f"/graphs/{gid}", "failed", "admin"))

    role_of = {v: k for k, v in team.key_ids.items()}
    events = all_events(client, team)
    got = [(e["action"], e["target"], e["outcome"], role_of[uuid.UUID(str(e["actor_key_id"]))]) for e in events]
    assert got == expected
    assert all(e["actor"] == "key" and e["request_id"] for e in events)
    assert len({e["request_id"] for e in events}) == len(events)
    assert [e["status"] for e in events][:4] == [201, 202, 403, 200]


def test_events_filter_by_actor_action_target_and_time(client: TestClient, team: Team, graph_npz: bytes) -> None:
    h = team.headers
    gid = client.post("/v1/graphs", headers=h["auditor"], files={"npz": ("g.npz", graph_npz)}).json()["id"]
    middle = datetime.now().astimezone()
    client.delete(f"/v1/graphs/{gid}", headers=h["viewer"])
    client.delete(f"/v1/graphs/{gid}", headers=h["admin"])

    def actions(**query: str) -> list[tuple[object, object]]:
        return [(e["action"], e["outcome"]) for e in all_events(client, team, **query)]

    assert actions(actor_key_id=str(team.key_ids["viewer"])) == [("graph.delete", "denied")]
    assert actions(action="graph.upload") == [("graph.upload", "succeeded")]
    assert actions(target=f"/graphs/{gid}") == [
        ("graph.upload", "succeeded"), ("graph.delete", "denied"), ("graph.delete", "succeeded")]  # fmt: skip
    assert actions(since=middle.isoformat()) == [("graph.delete", "denied"), ("graph.delete", "succeeded")]
    assert actions(until=middle.isoformat()) == [("graph.upload", "succeeded")]
    assert actions(since=(middle + timedelta(days=1)).isoformat()) == []
    assert actions(actor="cli") == []


def test_events_are_admin_only_and_errors_are_problems(client: TestClient, team: Team) -> None:
    assert_problem(client.get("/v1/events", headers=team.headers["auditor"]), 403, "role-not-allowed")
    assert_problem(client.get("/v1/events/export", headers=team.headers["viewer"]), 403, "role-not-allowed")
    assert_problem(client.get("/v1/events"), 401)
    bad = client.get("/v1/events", headers=team.headers["admin"], params={"page_token": "nope"})
    assert_problem(bad, 400, "invalid-page-token")
    assert_problem(client.get("/v1/events", headers=team.headers["admin"], params={"actor": "robot"}), 422)
    naive = client.get("/v1/events", headers=team.headers["admin"], params={"since": "2026-11-28T07:00:00"})
    assert_problem(naive, 422, "validation-error")  # a time without its zone is ambiguous


def test_a_tenant_sees_only_its_own_trail(client: TestClient, team: Team, sessions: sessionmaker[Session]) -> None:
    other = Team(sessions)
    client.post("/v1/keys", headers=other.headers["admin"], json={"role": "auditor"})
    assert all_events(client, team) == []
    assert [e["action"] for e in all_events(client, other)] == ["key.create"]


def test_the_export_is_json_lines_oldest_first_and_itself_an_entry(client: TestClient, team: Team) -> None:
    for role in ("viewer", "auditor"):
        client.post("/v1/keys", headers=team.headers["admin"], json={"role": role})
    response = client.get("/v1/events/export", headers=team.headers["admin"], params={"action": "key.create"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert [e["action"] for e in lines] == ["key.create", "key.create"]
    assert lines[0]["created_at"] <= lines[1]["created_at"]
    assert [e["action"] for e in all_events(client, team)][-1] == "events.export"


def test_the_application_cannot_change_or_delete_an_entry(client: TestClient, team: Team) -> None:
    """Through the very engine the app uses (the application's database role): the trigger refuses."""
    client.post("/v1/keys", headers=team.headers["admin"], json={"role": "viewer"})
    engine: Engine = client.app.state.engine  # type: ignore[attr-defined]
    where = {"tenant": team.tenant_id}
    statements = [
        "UPDATE trail_events SET outcome = 'failed' WHERE tenant_id = :tenant",
        "DELETE FROM trail_events WHERE tenant_id = :tenant",
        "TRUNCATE trail_events",
    ]
    for statement in statements:
        with pytest.raises(DBAPIError, match="append-only"), engine.begin() as conn:
            conn.execute(text(statement), where if ":tenant" in statement else {})
    assert [e["outcome"] for e in all_events(client, team)] == ["succeeded"]


def test_revoking_the_last_admin_key_is_refused(
    client: TestClient, team: Team, sessions: sessionmaker[Session]
) -> None:
    admin = team.headers["admin"]
    only = client.post(f"/v1/keys/{team.key_ids['admin']}/revoke", headers=admin)
    assert_problem(only, 409, "last-admin-key")
    second = client.post("/v1/keys", headers=admin, json={"role": "admin"}).json()
    assert second["key"].startswith("bind_") and second["role"] == "admin"
    assert client.post(f"/v1/keys/{team.key_ids['admin']}/revoke", headers=admin).json()["revoked_at"]
    assert_problem(client.get("/v1/keys", headers=admin), 401)  # the revoked key no longer works
    listed = client.get("/v1/keys", headers={"Authorization": f"Bearer {second['key']}"}).json()["items"]
    assert {k["role"] for k in listed} == {"viewer", "auditor", "admin"} and "key" not in listed[0]
    with sessions() as session:
        assert session.get(ApiKey, team.key_ids["admin"]) is not None  # revoked, not deleted


def test_console_actions_are_in_the_trail(client: TestClient, team: Team, sessions: sessionmaker[Session]) -> None:
    """Signing in, a refused cancel (viewer), a report read and signing out, through the console."""
    import re

    browser = TestClient(client.app, follow_redirects=False)
    viewer_key = team.headers["viewer"]["Authorization"].removeprefix("Bearer ")
    form = re.search(r'name="csrf" value="([^"]+)"', browser.get("/console/sign-in").text)
    assert form is not None
    assert browser.post("/console/sign-in", data={"api_key": viewer_key, "csrf": form.group(1)}).status_code == 303
    page = re.search(r'name="csrf" value="([^"]+)"', browser.get("/console/audits").text)
    assert page is not None
    audit_id = uuid.uuid4()
    assert browser.post(f"/console/audits/{audit_id}/cancel", data={"csrf": page.group(1)}).status_code == 403
    assert browser.get(f"/console/audits/{audit_id}/report").status_code == 404
    assert browser.post("/console/sign-out", data={"csrf": page.group(1)}).status_code == 303
    got = [(e["action"], e["outcome"], e["status"]) for e in all_events(client, team)]
    assert got == [("console.sign_in", "succeeded", 303), ("audit.cancel", "denied", 403),
                   ("report.read", "failed", 404), ("console.sign_out", "succeeded", 303)]  # fmt: skip
    assert {e["actor_key_id"] for e in all_events(client, team)} == {str(team.key_ids["viewer"])}
