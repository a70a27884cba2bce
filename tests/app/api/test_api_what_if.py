"""POST /v1/audits/{id}/what-if: the estimate of deleting a chosen set of training nodes at once, in the user's
ids; its errors, the 409 before influence, and isolation between tenants."""

from __future__ import annotations

import uuid

import pytest
from apihelp import assert_problem, fields
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Audit, InfluenceRow

DELTAS = {"ann": (-0.3, -0.2, -0.4), "bob": (-0.1, 0.0, -0.2), "cy": (0.25, 0.3, 0.2), "di": (-0.05, -0.1, 0.0)}


@pytest.fixture
def audit_id(client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]) -> str:
    """A succeeded audit whose training nodes have text ids (stored as the worker stores them)."""
    audit = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"]
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(audit)).values(state="succeeded"))
        session.add_all(
            InfluenceRow(audit_id=uuid.UUID(audit), position=p, node_index=10 + p, node_id=10 + p, node_key=key,
                         grp=p % 2, label=1, delta=d, delta_sp=sp, delta_eo=eo)
            for p, (key, (d, sp, eo)) in enumerate(DELTAS.items())
        )  # fmt: skip
    return str(audit)


def test_the_estimate_of_a_set_is_the_sum_of_its_members(
    client: TestClient, auth: dict[str, str], audit_id: str
) -> None:
    answer = client.post(f"/v1/audits/{audit_id}/what-if", headers=auth, json={"nodes": ["ann", "cy", "ann"]})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["nodes"] == ["ann", "cy"] and body["size"] == 2  # a repeat counts once
    assert body["delta"] == pytest.approx(-0.05) and body["delta_sp"] == pytest.approx(0.1)
    assert body["delta_eo"] == pytest.approx(-0.2) and "influence function" in body["method"] and body["note"]
    top = client.post(f"/v1/audits/{audit_id}/what-if", headers=auth, json={"top": 2}).json()
    assert top["nodes"] == ["ann", "bob"] and top["delta"] == pytest.approx(-0.4)  # the two most harmful


def test_bad_choices_name_the_field_and_the_values(client: TestClient, auth: dict[str, str], audit_id: str) -> None:
    url = f"/v1/audits/{audit_id}/what-if"
    unknown = assert_problem(client.post(url, headers=auth, json={"nodes": ["ann", "zed"]}), 422, "validation-error")
    assert unknown["errors"][0]["field"] == "nodes" and "'zed'" in unknown["detail"]
    both = assert_problem(client.post(url, headers=auth, json={"nodes": ["ann"], "top": 1}), 422, "validation-error")
    assert both["detail"] == "nodes, top or rule: give exactly one of them"  # was "nodes or top: ...", no rule
    assert fields(both) == {"nodes", "top"}
    none = assert_problem(client.post(url, headers=auth, json={}), 422)
    assert none["detail"] == "nodes, top or rule: give exactly one of them"
    assert client.post(url, headers=auth, json={"top": 0}).status_code == 422
    assert client.post(url, headers=auth, json={"nodes": []}).status_code == 422


def test_before_influence_and_across_tenants(
    client: TestClient, auth: dict[str, str], other_auth: dict[str, str], graph_id: str, audit_id: str
) -> None:
    queued = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"]
    answer = client.post(f"/v1/audits/{queued}/what-if", headers=auth, json={"top": 3})
    assert_problem(answer, 409, "influence-not-ready")
    assert_problem(client.post(f"/v1/audits/{audit_id}/what-if", headers=other_auth, json={"top": 1}), 404)
