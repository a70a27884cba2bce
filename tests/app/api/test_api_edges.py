"""GET /v1/audits/{id}/edges (issue 19): every edge's ΔΓ as the worker stores it, in the orders and keyset pages of
/influence; /edges.csv, /edges.parquet, the export's and the report's edge section; 404, and 409 before the audit
succeeded or when it attributed no edges (with the reason)."""

from __future__ import annotations

import io
import json
import uuid
from dataclasses import asdict, replace
from typing import Any

import pandas as pd
import pytest
from apihelp import assert_problem, forge_token
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.audits.repository import Claim, succeed
from app.core.db.tables import Audit
from app.core.lease import Lease
from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.pipeline.results import EdgeRow, InfluenceRow
from bind_core.reporting.exports import EDGE_COLUMNS

Outcome = tuple[dict[str, Any], list[InfluenceRow], list[EdgeRow]]
FAST: dict[str, Any] = {"training": {"epochs": 30}, "bootstrap": 0, "validation_sample": 0, "budgets": []}


@pytest.fixture(scope="module")
def outcome() -> Outcome:
    """A tiny real one-layer GCN audit with edges: its stored results, node rows and edge rows."""
    result = run_audit(synthetic(80, seed=0, train_per_class=15), AuditConfig.from_dict({**FAST, "edges": True}))
    return json.loads(json.dumps(result.to_dict())), result.influence_rows(), result.edge_rows()


def store(sessions: sessionmaker[Session], audit_id: str, outcome: Outcome) -> None:
    """Store an outcome through the worker's own write (`succeed`, fenced on a claimed attempt)."""
    results, nodes, edges = outcome
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(audit_id)).values(state="running", attempts=1))
        claim = Claim(uuid.UUID(audit_id), 1, None, None, {})
        lease = succeed(session, claim, results=results, weights=None, model_config=None, influence=nodes, edges=edges)
        assert lease is Lease.HELD


def new_audit(client: TestClient, auth: dict[str, str], graph_id: str) -> str:
    return str(client.post("/v1/audits", headers=auth, json={"graph_id": graph_id, "edges": True}).json()["id"])


@pytest.fixture
def audit_id(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session], outcome: Outcome
) -> str:
    audit_id = new_audit(client, auth, graph_id)
    for route in ("edges", "edges.csv", "edges.parquet"):
        assert_problem(client.get(f"/v1/audits/{audit_id}/{route}", headers=auth), 409, "audit-not-succeeded")
    store(sessions, audit_id, outcome)
    return audit_id


def walk(client: TestClient, auth: dict[str, str], audit_id: str, order: str, limit: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = None
    while True:
        params = {"order": order, "limit": limit} | ({"page_token": token} if token else {})
        response = client.get(f"/v1/audits/{audit_id}/edges", headers=auth, params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["order"] == order and "harmful edge" in body["sign_convention"]
        assert len(body["items"]) <= limit
        items += body["items"]
        if (token := body["next_page_token"]) is None:
            return items


def test_the_request_takes_the_option(client: TestClient, auth: dict[str, str], graph_id: str) -> None:
    audit = client.get(f"/v1/audits/{new_audit(client, auth, graph_id)}", headers=auth).json()
    assert audit["config"]["edges"] is True
    plain = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()
    assert plain["config"]["edges"] is False
    assert_problem(client.post("/v1/audits", headers=auth, json={"graph_id": graph_id, "edges": "yes"}), 422)


@pytest.mark.parametrize("limit", [7, 200])
def test_orders_and_pages(
    client: TestClient,
    auth: dict[str, str],
    graph_id: str,
    sessions: sessionmaker[Session],
    outcome: Outcome,
    limit: int,
) -> None:
    """Every stored edge comes back once per order; deltas rounded to one decimal tie often, to test the tie-break."""
    results, nodes, edges = outcome
    tied = [replace(e, delta=round(e.delta, 1)) for e in edges]
    audit_id = new_audit(client, auth, graph_id)
    store(sessions, audit_id, (results, nodes, tied))
    harmful = [encode(r) for r in sorted(tied, key=lambda r: (r.delta, r.position))]
    assert len({r.delta for r in tied}) < len(tied)  # there are ties
    assert walk(client, auth, audit_id, "harmful", limit) == harmful
    assert walk(client, auth, audit_id, "helpful", limit) == harmful[::-1]
    assert walk(client, auth, audit_id, "edge", limit) == [encode(r) for r in tied]


def test_the_default_page_is_the_most_harmful_edges_of_the_results(
    client: TestClient, auth: dict[str, str], audit_id: str, outcome: Outcome
) -> None:
    section = outcome[0]["edges"]
    body = client.get(f"/v1/audits/{audit_id}/edges", headers=auth, params={"limit": 3}).json()
    top = [{k: v for k, v in item.items() if k != "affects"} for item in body["items"]]
    assert top == section["top_harmful"][:3] and all(item["affects"] for item in body["items"])
    url = f"/v1/audits/{audit_id}/edges"
    assert_problem(client.get(url, headers=auth, params={"order": "edge", "page_token": body["next_page_token"]}), 400)
    for order, key in (("harmful", [0.0, 2**70]), ("helpful", [float("nan"), 1]), ("edge", [1.5])):
        params = {"order": order, "page_token": forge_token(f"edges:{order}", key)}
        assert_problem(client.get(url, headers=auth, params=params), 400, "invalid-page-token")
    assert_problem(client.get(url, headers=auth, params={"order": "random"}), 422)


def test_missing_other_tenant_and_not_computed(
    client: TestClient,
    auth: dict[str, str],
    other_auth: dict[str, str],
    graph_id: str,
    sessions: sessionmaker[Session],
    audit_id: str,
    outcome: Outcome,
) -> None:
    assert_problem(client.get(f"/v1/audits/{uuid.uuid4()}/edges", headers=auth), 404, "audit-not-found")
    assert_problem(client.get(f"/v1/audits/{audit_id}/edges", headers=other_auth), 404, "audit-not-found")
    results, nodes, _ = outcome
    unasked = new_audit(client, auth, graph_id)
    store(sessions, unasked, ({k: v for k, v in results.items() if k != "edges"}, nodes, []))
    for route in ("edges", "edges.csv", "edges.parquet"):
        assert_problem(client.get(f"/v1/audits/{unasked}/{route}", headers=auth), 409, "edges-not-computed")
    reason = "the influence stage did not run (edges build on it)"
    two_layer = new_audit(client, auth, graph_id)
    section = {**results["edges"], "computed": False, "reason": reason}
    store(sessions, two_layer, ({**results, "edges": section}, nodes, []))
    problem = assert_problem(client.get(f"/v1/audits/{two_layer}/edges", headers=auth), 409, "edges-not-computed")
    assert reason in problem["detail"]


def test_exports_and_report(client: TestClient, auth: dict[str, str], audit_id: str, outcome: Outcome) -> None:
    _, _, edges = outcome
    csv = client.get(f"/v1/audits/{audit_id}/edges.csv", headers=auth)
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    table = pd.read_csv(io.StringIO(csv.text))
    assert tuple(table.columns) == EDGE_COLUMNS and len(table) == len(edges)
    assert table["delta"].tolist() == [e.delta for e in edges]
    parquet = client.get(f"/v1/audits/{audit_id}/edges.parquet", headers=auth)
    assert parquet.status_code == 200
    assert pd.read_parquet(io.BytesIO(parquet.content)).to_dict("records") == [encode(e) for e in edges]
    export = client.get(f"/v1/audits/{audit_id}/export", headers=auth).json()
    assert export["edges"]["edges"] == len(edges) and export["edges"]["top_harmful"]
    page = client.get(f"/v1/audits/{audit_id}/report", headers=auth).text
    assert 'id="edges"' in page and "Which connections carry the bias" in page


def test_text_ids_are_stored_served_and_exported_as_given(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session], outcome: Outcome
) -> None:
    """Where the user's ids are text, the worker stores them (``node_key``, ``u_key``, ``v_key``) and every route
    serves them as given: the pages, the CSV and Parquet exports, built from the typed rows read back."""
    results, nodes, edges = outcome
    nodes = [replace(n, node_id=f"0{n.node_index}") for n in nodes]
    edges = [replace(e, u_id=f"0{e.u_index}", v_id=f"user {e.v_index}") for e in edges]
    audit_id = new_audit(client, auth, graph_id)
    store(sessions, audit_id, (results, nodes, edges))
    assert walk(client, auth, audit_id, "edge", 200) == [encode(e) for e in edges]
    table = pd.read_csv(io.StringIO(client.get(f"/v1/audits/{audit_id}/edges.csv", headers=auth).text), dtype=str)
    assert table["u_id"].tolist() == [e.u_id for e in edges] and table["v_id"].tolist() == [e.v_id for e in edges]
    parquet = client.get(f"/v1/audits/{audit_id}/edges.parquet", headers=auth)
    assert pd.read_parquet(io.BytesIO(parquet.content)).to_dict("records") == [encode(e) for e in edges]
    influence = client.get(f"/v1/audits/{audit_id}/influence.parquet", headers=auth)
    assert pd.read_parquet(io.BytesIO(influence.content)).to_dict("records") == [asdict(n) for n in nodes]


def test_openapi_declares_the_routes(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for route in ("edges", "edges.csv", "edges.parquet"):
        responses = paths[f"/v1/audits/{{audit_id}}/{route}"]["get"]["responses"]
        assert {"200", "404", "409"} <= set(responses)
