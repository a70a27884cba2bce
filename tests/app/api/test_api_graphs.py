"""GET/DELETE /v1/graphs: reading, cursor pagination, deletion rules and tenant isolation."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from apihelp import assert_problem, forge_token
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Audit


def upload(client: TestClient, auth: dict[str, str], npz: bytes, name: str) -> str:
    response = client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", npz)}, data={"name": name})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_read_graph(client: TestClient, auth: dict[str, str], graph_id: str) -> None:
    response = client.get(f"/v1/graphs/{graph_id}", headers=auth)
    assert response.status_code == 200
    assert response.json()["id"] == graph_id and response.json()["summary"]["nodes"] == 120
    assert_problem(client.get(f"/v1/graphs/{uuid.uuid4()}", headers=auth), 404, "graph-not-found")


def test_pagination_walks_every_graph_once(client: TestClient, auth: dict[str, str], graph_npz: bytes) -> None:
    ids = [upload(client, auth, graph_npz, f"g{i}") for i in range(5)]
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        params = {"limit": 2} | ({"page_token": token} if token else {})
        body = client.get("/v1/graphs", headers=auth, params=params).json()
        seen += [item["id"] for item in body["items"]]
        pages += 1
        token = body["next_page_token"]
        if token is None:
            break
    assert pages == 3
    assert seen == ids[::-1]  # newest first
    assert len(client.get("/v1/graphs", headers=auth, params={"limit": 200}).json()["items"]) == 5
    assert_problem(client.get("/v1/graphs", headers=auth, params={"page_token": "garbage"}), 400, "invalid-page-token")


@pytest.mark.parametrize(
    "key",
    [
        ["2026-01-01T00:00:00", str(uuid.uuid4())],  # a naive time (the column refuses it: was a 500)
        ["0001-01-01T00:00:00+14:00", str(uuid.uuid4())],  # before UTC's first representable time
        ["2026-01-01T00:00:00+00:00", "not-a-uuid"],
        [2**70, str(uuid.uuid4())],
        ["2026-01-01T00:00:00+00:00", ["nested"]],
    ],
)
def test_forged_listing_tokens_are_400(client: TestClient, auth: dict[str, str], key: list[Any]) -> None:
    for path, kind in [("/v1/graphs", "graphs"), ("/v1/audits", "audits"), ("/v1/schedules", "schedules")]:
        response = client.get(path, headers=auth, params={"page_token": forge_token(kind, key)})
        assert_problem(response, 400, "invalid-page-token")
    valid = forge_token("graphs", ["9999-12-31T23:59:59+00:00", str(uuid.uuid4())])
    assert client.get("/v1/graphs", headers=auth, params={"page_token": valid}).status_code == 200
    assert_problem(client.get("/v1/graphs", headers=auth, params={"limit": 201}), 422)


def test_tenant_isolation(client: TestClient, auth: dict[str, str], other_auth: dict[str, str], graph_id: str) -> None:
    assert_problem(client.get(f"/v1/graphs/{graph_id}", headers=other_auth), 404)
    assert_problem(client.delete(f"/v1/graphs/{graph_id}", headers=other_auth), 404)
    assert client.get("/v1/graphs", headers=other_auth).json()["items"] == []
    audit = client.post("/v1/audits", headers=other_auth, json={"graph_id": graph_id})
    assert_problem(audit, 422)
    assert client.get(f"/v1/graphs/{graph_id}", headers=auth).status_code == 200


def test_delete_graph(client: TestClient, auth: dict[str, str], graph_id: str) -> None:
    response = client.delete(f"/v1/graphs/{graph_id}", headers=auth)
    assert response.status_code == 204 and response.content == b""
    assert_problem(client.get(f"/v1/graphs/{graph_id}", headers=auth), 404)
    assert_problem(client.delete(f"/v1/graphs/{graph_id}", headers=auth), 404)


def test_delete_refused_while_an_audit_needs_the_graph(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]
) -> None:
    audit_id = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"]
    assert_problem(client.delete(f"/v1/graphs/{graph_id}", headers=auth), 409, "graph-in-use")
    with sessions.begin() as session:
        session.execute(
            update(Audit).where(Audit.id == uuid.UUID(audit_id)).values(state="succeeded", results={"metrics": {}})
        )
    assert client.delete(f"/v1/graphs/{graph_id}", headers=auth).status_code == 204
    audit = client.get(f"/v1/audits/{audit_id}", headers=auth).json()
    assert audit["graph_id"] is None and audit["state"] == "succeeded" and audit["results"] == {"metrics": {}}
