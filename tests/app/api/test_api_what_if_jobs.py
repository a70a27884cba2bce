"""The what-if's verification jobs: ``verify: true`` queues one (202, Location), read, listed a page at a time and
cancelled under ``/v1/audits/{id}/what-ifs``; their errors, roles and isolation between tenants; and choosing the set
by a profile rule."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from apihelp import assert_problem
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Audit, InfluenceRow, Tenant, WhatIf
from app.tenants.keys import create_api_key

DELTAS = {"ann": (-0.3, -0.2, -0.4), "bob": (-0.1, 0.0, -0.2), "cy": (0.25, 0.3, 0.2), "di": (-0.05, -0.1, 0.0)}
RULES = [
    {"text": "group == 1", "conditions": [{"variable": "group", "op": "==", "value": 1.0, "text": "group == 1"}],
     "members": [1, 3]},
    {"text": "degree > 3", "conditions": [{"variable": "degree", "op": ">", "value": 3.0, "text": "degree > 3"}]},
]  # fmt: skip


def _succeed(sessions: sessionmaker[Session], audit: str, **values: Any) -> None:
    """Mark ``audit`` succeeded with a stored model and its influence rows (as the worker stores them)."""
    fields: dict[str, Any] = {
        "state": "succeeded",
        "model_weights": b"weights",
        "model_config": {"model": {}},
        "results": {"profile": {"rules": RULES}},
    }
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(audit)).values(**(fields | values)))
        session.add_all(
            InfluenceRow(audit_id=uuid.UUID(audit), position=p, node_index=10 + p, node_id=10 + p, node_key=key,
                         grp=p % 2, label=1, delta=d, delta_sp=sp, delta_eo=eo)
            for p, (key, (d, sp, eo)) in enumerate(DELTAS.items())
        )  # fmt: skip


@pytest.fixture
def make_audit(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]
) -> Callable[..., str]:
    def make(**values: Any) -> str:
        audit = str(client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"])
        _succeed(sessions, audit, **values)
        return audit

    return make


@pytest.fixture
def audit_id(make_audit: Callable[..., str]) -> str:
    return make_audit()


def _verify(client: TestClient, auth: dict[str, str], audit: str, **body: Any) -> Any:
    return client.post(f"/v1/audits/{audit}/what-if", headers=auth, json={"verify": True, **body})


def test_verify_queues_a_job_with_the_estimate_and_the_set(
    client: TestClient, auth: dict[str, str], audit_id: str, sessions: sessionmaker[Session]
) -> None:
    answer = _verify(client, auth, audit_id, nodes=["cy", "ann"])
    assert answer.status_code == 202, answer.text
    job = answer.json()
    assert answer.headers["Location"] == f"/v1/audits/{audit_id}/what-ifs/{job['id']}"
    assert job["state"] == "queued" and job["progress"] == 0 and job["audit_id"] == audit_id
    assert job["nodes"] == ["cy", "ann"] and job["size"] == 2 and job["chosen_by"]["nodes"] == 2
    assert job["estimate"]["delta"] == pytest.approx(-0.05) and job["result"] is None
    assert job["seeds"] == [1, 10, 100] and job["random_sets"] == 3  # the audit has no debias_seeds
    with sessions() as session:
        row = session.scalar(select(WhatIf).where(WhatIf.id == uuid.UUID(job["id"])))
        assert row is not None and row.positions == [2, 0]  # places in the training split, as the worker needs
    events = client.get("/v1/events", headers=auth, params={"action": "what_if.verify"}).json()["items"]
    assert [e["target"] for e in events] == [f"/audits/{audit_id}/what-ifs/{job['id']}"]
    read = client.get(answer.headers["Location"], headers=auth)
    assert read.status_code == 200 and read.json() == job
    # Without verify the answer is the estimate, at once, and nothing is queued.
    plain = client.post(f"/v1/audits/{audit_id}/what-if", headers=auth, json={"top": 1})
    assert plain.status_code == 200 and "state" not in plain.json()
    assert len(client.get(f"/v1/audits/{audit_id}/what-ifs", headers=auth).json()["items"]) == 1


def test_seeds_and_random_sets_are_taken_or_defaulted_from_the_audit(
    client: TestClient, auth: dict[str, str], make_audit: Callable[..., str]
) -> None:
    audit = make_audit(config={"debias_seeds": [4, 5, 6, 7]})
    assert _verify(client, auth, audit, top=1).json()["seeds"] == [4, 5, 6, 7]
    job = _verify(client, auth, audit, top=1, seeds=[9, 8, 7], random_sets=2).json()
    assert job["seeds"] == [9, 8, 7] and job["random_sets"] == 2


def test_bad_verifications_are_problems(
    client: TestClient, auth: dict[str, str], make_audit: Callable[..., str], graph_id: str
) -> None:
    audit = make_audit()
    for body in (
        {"seeds": [1, 2]},
        {"seeds": [1, 1, 2]},
        {"random_sets": 0},
        {"random_sets": 11},
        {"seeds": [-1, 2, 3]},
    ):
        assert_problem(_verify(client, auth, audit, top=1, **body), 422)
    plain = client.post(f"/v1/audits/{audit}/what-if", headers=auth, json={"top": 1, "seeds": [1, 2, 3]})
    assert "verify: true" in str(assert_problem(plain, 422))  # a setting of the verification, without one
    big = assert_problem(_verify(client, auth, audit, nodes=["ann", "bob", "di"]), 422, "too-many-nodes")
    assert big["errors"][0]["field"] == "nodes" and "at most 2" in big["detail"]
    assert_problem(_verify(client, auth, audit, nodes=["zed"]), 422, "validation-error")
    assert_problem(_verify(client, auth, audit, nodes=[]), 422)
    assert_problem(_verify(client, auth, str(uuid.uuid4()), top=1), 404, "audit-not-found")
    queued = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"]
    assert_problem(_verify(client, auth, queued, top=1), 409, "influence-not-ready")
    assert_problem(_verify(client, auth, make_audit(state="failed"), top=1), 409, "audit-not-succeeded")
    assert_problem(_verify(client, auth, make_audit(model_weights=None), top=1), 409, "model-not-stored")
    assert client.get(f"/v1/audits/{audit}/what-ifs", headers=auth).json()["items"] == []  # nothing was queued


def test_a_viewer_may_estimate_but_not_verify(
    client: TestClient, auth: dict[str, str], audit_id: str, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        tenant = session.execute(
            select(Tenant.name).join(Audit, Audit.tenant_id == Tenant.id).where(Audit.id == uuid.UUID(audit_id))
        ).scalar_one()
        viewer_key = create_api_key(session, tenant, role="viewer")
    viewer = {"Authorization": f"Bearer {viewer_key}"}
    assert client.post(f"/v1/audits/{audit_id}/what-if", headers=viewer, json={"top": 1}).status_code == 200
    assert_problem(_verify(client, viewer, audit_id, top=1), 403, "role-not-allowed")
    job = _verify(client, auth, audit_id, top=1).json()
    assert client.get(f"/v1/audits/{audit_id}/what-ifs/{job['id']}", headers=viewer).status_code == 200
    assert_problem(client.post(f"/v1/audits/{audit_id}/what-ifs/{job['id']}/cancel", headers=viewer), 403)


def test_another_tenant_sees_none_of_it(
    client: TestClient, auth: dict[str, str], other_auth: dict[str, str], audit_id: str, make_audit: Callable[..., str]
) -> None:
    job = _verify(client, auth, audit_id, top=1).json()
    url = f"/v1/audits/{audit_id}/what-ifs"
    assert_problem(client.get(url, headers=other_auth), 404, "audit-not-found")
    assert_problem(client.get(f"{url}/{job['id']}", headers=other_auth), 404)
    assert_problem(client.post(f"{url}/{job['id']}/cancel", headers=other_auth), 404)
    assert_problem(_verify(client, other_auth, audit_id, top=1), 404)
    # The job is found only under its own audit.
    other_audit = make_audit()
    assert_problem(client.get(f"/v1/audits/{other_audit}/what-ifs/{job['id']}", headers=auth), 404, "what-if-not-found")
    assert client.get(f"{url}/{job['id']}", headers=auth).json()["state"] == "queued"


def test_the_list_is_newest_first_a_page_at_a_time(client: TestClient, auth: dict[str, str], audit_id: str) -> None:
    made = [_verify(client, auth, audit_id, top=1).json()["id"] for _ in range(5)]
    url = f"/v1/audits/{audit_id}/what-ifs"
    first = client.get(url, headers=auth, params={"limit": 2}).json()
    assert len(first["items"]) == 2 and first["next_page_token"]
    seen = [item["id"] for item in first["items"]]
    token = first["next_page_token"]
    while token:
        page = client.get(url, headers=auth, params={"limit": 2, "page_token": token}).json()
        seen += [item["id"] for item in page["items"]]
        token = page["next_page_token"]
    assert seen == made[::-1]
    assert "nodes" not in first["items"][0] and "result" not in first["items"][0]  # a listing is a summary
    assert_problem(client.get(url, headers=auth, params={"page_token": "nonsense"}), 400, "invalid-page-token")
    audits_token = client.get("/v1/audits", headers=auth, params={"limit": 1}).json()["next_page_token"]
    assert_problem(client.get(url, headers=auth, params={"page_token": audits_token}), 400, "invalid-page-token")


def test_cancel_like_an_audit(
    client: TestClient, auth: dict[str, str], audit_id: str, sessions: sessionmaker[Session]
) -> None:
    url = f"/v1/audits/{audit_id}/what-ifs"
    job = _verify(client, auth, audit_id, top=1).json()
    cancelled = client.post(f"{url}/{job['id']}/cancel", headers=auth)
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled" and cancelled.json()["finished_at"]
    assert client.post(f"{url}/{job['id']}/cancel", headers=auth).json()["state"] == "cancelled"  # a no-op again
    done = _verify(client, auth, audit_id, top=1).json()
    with sessions.begin() as session:
        session.execute(update(WhatIf).where(WhatIf.id == uuid.UUID(done["id"])).values(state="succeeded"))
    assert_problem(client.post(f"{url}/{done['id']}/cancel", headers=auth), 409, "what-if-finished")
    assert_problem(client.post(f"{url}/{uuid.uuid4()}/cancel", headers=auth), 404, "what-if-not-found")


def test_choose_by_a_profile_rule(client: TestClient, auth: dict[str, str], audit_id: str) -> None:
    url = f"/v1/audits/{audit_id}/what-if"
    estimate = client.post(url, headers=auth, json={"rule": 0})
    assert estimate.status_code == 200, estimate.text
    assert estimate.json()["nodes"] == ["bob", "di"] and estimate.json()["delta"] == pytest.approx(-0.15)
    job = _verify(client, auth, audit_id, rule=0).json()
    assert job["chosen_by"] == {"rule": 0, "conditions": ["group == 1"], "nodes": None, "top": None}
    assert job["nodes"] == ["bob", "di"]
    missing = assert_problem(client.post(url, headers=auth, json={"rule": 7}), 422, "validation-error")
    assert missing["errors"][0]["field"] == "rule" and "2 rule(s)" in missing["detail"]
    assert_problem(client.post(url, headers=auth, json={"rule": 1}), 409, "rule-members-not-stored")
    both = assert_problem(client.post(url, headers=auth, json={"rule": 0, "top": 1}), 422, "validation-error")
    assert "exactly one" in both["detail"]
    assert_problem(client.post(url, headers=auth, json={"rule": 0, "nodes": ["ann"]}), 422, "validation-error")
