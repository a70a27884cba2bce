"""GET /v1/audits/{id}/influence: orders, keyset pagination, sign convention and the 409 before rows."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from apihelp import assert_problem, forge_token
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Audit, InfluenceRow

N = 37


@pytest.fixture
def audit_with_rows(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]
) -> tuple[str, list[dict[str, Any]]]:
    """A succeeded audit with N influence rows (some deltas tied), inserted as the worker would."""
    audit_id = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"]
    assert_problem(client.get(f"/v1/audits/{audit_id}/influence", headers=auth), 409, "influence-not-ready")
    rng = random.Random(3)
    rows = [
        {
            "position": p,
            "node_index": (p * 7) % N + 1000,
            "node_id": 5_000_000_000 + p,
            "group": p % 2,
            "label": (p // 2) % 2,
            "delta": round(rng.uniform(-1, 1), 1),  # one decimal: many ties, to test the tie-break
            "delta_sp": rng.uniform(-1, 1),
            "delta_eo": rng.uniform(-1, 1),
            "settled": (True, False, None)[p % 3],  # the step estimate's flag; None: the linear estimate
        }
        for p in range(N)
    ]
    with sessions.begin() as session:
        session.execute(
            update(Audit).where(Audit.id == uuid.UUID(audit_id)).values(state="succeeded", stage="validation")
        )
        session.add_all(
            InfluenceRow(audit_id=uuid.UUID(audit_id), grp=r["group"], **{k: v for k, v in r.items() if k != "group"})
            for r in rows
        )
    return audit_id, rows


def walk(client: TestClient, auth: dict[str, str], audit_id: str, order: str, limit: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = None
    while True:
        params = {"order": order, "limit": limit} | ({"page_token": token} if token else {})
        response = client.get(f"/v1/audits/{audit_id}/influence", headers=auth, params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["order"] == order and "negative" in body["sign_convention"].lower()
        assert len(body["items"]) <= limit
        items += body["items"]
        if (token := body["next_page_token"]) is None:
            return items


@pytest.mark.parametrize("limit", [1, 5, 200])
def test_orders_and_pages(
    client: TestClient, auth: dict[str, str], audit_with_rows: tuple[str, list[dict[str, Any]]], limit: int
) -> None:
    audit_id, rows = audit_with_rows
    harmful = sorted(rows, key=lambda r: (r["delta"], r["position"]))
    assert walk(client, auth, audit_id, "harmful", limit) == harmful
    assert walk(client, auth, audit_id, "helpful", limit) == harmful[::-1]
    assert walk(client, auth, audit_id, "node", limit) == sorted(rows, key=lambda r: r["node_index"])


def test_default_page_and_bad_tokens(
    client: TestClient, auth: dict[str, str], audit_with_rows: tuple[str, list[dict[str, Any]]]
) -> None:
    audit_id, rows = audit_with_rows
    url = f"/v1/audits/{audit_id}/influence"
    body = client.get(url, headers=auth, params={"limit": 3}).json()
    assert body["order"] == "harmful" and body["items"][0]["delta"] == min(r["delta"] for r in rows)
    assert body["items"][0]["node_id"] >= 5_000_000_000  # 64-bit ids survive
    harmful_token = body["next_page_token"]
    assert_problem(client.get(url, headers=auth, params={"order": "node", "page_token": harmful_token}), 400)
    assert_problem(
        client.get(url, headers=auth, params={"page_token": "eyJrIjoiaW5mbHVlbmNlOmhhcm1mdWwiLCJ2IjpbIngiLDFdfQ"}), 400
    )
    assert_problem(client.get(url, headers=auth, params={"order": "random"}), 422)
    assert_problem(client.get(f"/v1/audits/{uuid.uuid4()}/influence", headers=auth), 404)


FORGED = [
    ("harmful", [0.0, 2**70]),  # a position beyond int64 (was a 500: bigint out of range)
    ("node", [2**63, 1]),  # a node index beyond int64
    ("node", [-(2**63) - 1, 1]),
    ("helpful", [1e400, 1]),  # json reads 1e400 as inf
    ("harmful", [float("nan"), 1]),  # json writes and reads NaN
    ("harmful", [10**310, 1]),  # an integer beyond the float range
    ("harmful", [True, 1]),  # booleans are not numbers
    ("node", [1.5, 1]),  # a float for an integer column
    ("node", ["1", 1]),
    ("harmful", [0.0, None]),
]


@pytest.mark.parametrize(("order", "key"), FORGED)
def test_forged_tokens_are_400(
    client: TestClient,
    auth: dict[str, str],
    audit_with_rows: tuple[str, list[dict[str, Any]]],
    order: str,
    key: list[Any],
) -> None:
    audit_id, _ = audit_with_rows
    token = forge_token(f"influence:{order}", key)
    params = {"order": order, "page_token": token}
    response = client.get(f"/v1/audits/{audit_id}/influence", headers=auth, params=params)
    body = assert_problem(response, 400, "invalid-page-token")
    assert body["errors"][0]["field"] == "page_token"


def test_extreme_but_valid_tokens_give_empty_or_full_pages(
    client: TestClient, auth: dict[str, str], audit_with_rows: tuple[str, list[dict[str, Any]]]
) -> None:
    """The int64 and float bounds themselves are accepted: the database compares them, no error."""
    audit_id, _ = audit_with_rows
    url = f"/v1/audits/{audit_id}/influence"

    def page(order: str, key: list[Any]) -> list[dict[str, Any]]:
        params = {"order": order, "page_token": forge_token(f"influence:{order}", key)}
        response = client.get(url, headers=auth, params=params)
        assert response.status_code == 200, response.text
        items: list[dict[str, Any]] = response.json()["items"]
        return items

    assert page("node", [2**63 - 1, 2**63 - 1]) == []
    assert len(page("node", [-(2**63), 0])) == N
    assert page("harmful", [1.7976931348623157e308, 0]) == []
    assert len(page("helpful", [1.7976931348623157e308, 0])) == N
    assert len(page("harmful", [-5, 0])) == N  # an integer where a float is expected is a number all the same
