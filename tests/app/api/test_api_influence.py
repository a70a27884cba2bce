"""GET /v1/audits/{id}/influence: orders, keyset pagination, sign convention and the 409 before rows; rows without a
value (null deltas, no_minimum) stored by the worker's write, served, paged last, exported and summed."""

from __future__ import annotations

import base64
import csv
import dataclasses
import io
import json
import random
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apihelp import assert_problem, forge_token
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from app.audits.repository import Claim, check_influence_rows, succeed
from app.core.db.tables import Audit, InfluenceRow
from app.core.lease import Lease
from bind_core.pipeline.results import InfluenceRow as NodeRow
from bind_core.reporting.exports import INFLUENCE_COLUMNS

N = 37
GROUPS = ("north", "south")
CLASSES = ("approved", "denied")
NAMED = ("group", "group_name", "label_name")  # the stored row has grp, and no names (the results' graph has them)


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
            "no_minimum": None,  # every row has a value: the flag is null (present, as settled)
            "group_name": GROUPS[p % 2],  # the user's values of the codes, from the results' graph
            "label_name": CLASSES[(p // 2) % 2],
        }
        for p in range(N)
    ]
    names = {"graph": {"group_names": list(GROUPS), "class_names": list(CLASSES)}}
    with sessions.begin() as session:
        session.execute(
            update(Audit)
            .where(Audit.id == uuid.UUID(audit_id))
            .values(state="succeeded", stage="validation", results=names)
        )
        session.add_all(
            InfluenceRow(audit_id=uuid.UUID(audit_id), grp=r["group"], **{k: v for k, v in r.items() if k not in NAMED})
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


# Rows without a value: a node whose deletion has no minimum near the given weights (the step estimate's) has null
# deltas, settled false and no_minimum true. They are stored by the worker's own write (`succeed`).
M = 23
UNDEFINED = (1, 4, 5, 11, 17, 22)  # neighbours, the last position, and one among the ties
DEFINED = M - len(UNDEFINED)


def node_rows() -> list[NodeRow]:
    rng = random.Random(5)
    rows = []
    for p in range(M):
        where = {"position": p, "node_index": 100 + (p * 5) % M, "node_id": f"n{p}", "group": p % 2, "label": p % 3 % 2}
        if p in UNDEFINED:
            rows.append(NodeRow(**where, delta=None, delta_sp=None, delta_eo=None, settled=False, no_minimum=True))
        else:
            d = round(rng.uniform(-1, 1), 1)  # one decimal: ties, to test the tie-break next to the nulls
            rows.append(
                NodeRow(**where, delta=d, delta_sp=rng.uniform(-1, 1), delta_eo=rng.uniform(-1, 1), settled=True)
            )
    return rows


def served(row: NodeRow) -> dict[str, Any]:
    """The row as the API serves it: every key, the flags null where not set."""
    return dataclasses.asdict(row)


@pytest.fixture
def undefined_audit(client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]) -> str:
    """A succeeded audit whose rows include some without a value, stored through the worker's write."""
    audit_id = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"]
    key = uuid.UUID(audit_id)
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == key).values(state="running", attempts=1))
        rows = node_rows()
        check_influence_rows(rows)  # what the worker checks before storing
        claim = Claim(key, 1, None, None, {})
        lease = succeed(session, claim, results={}, weights=None, model_config=None, influence=rows)
        assert lease is Lease.HELD
    return str(audit_id)


def harmful_order(rows: list[NodeRow]) -> list[dict[str, Any]]:
    valued = sorted((r for r in rows if r.delta is not None), key=lambda r: (r.delta, r.position))
    return [served(r) for r in valued] + [served(r) for r in rows if r.delta is None]


def helpful_order(rows: list[NodeRow]) -> list[dict[str, Any]]:
    valued = sorted((r for r in rows if r.delta is not None), key=lambda r: (r.delta, r.position), reverse=True)
    return [served(r) for r in valued] + [served(r) for r in rows if r.delta is None]


def test_rows_without_a_value_are_stored_and_served_as_null(
    client: TestClient, auth: dict[str, str], undefined_audit: str, sessions: sessionmaker[Session]
) -> None:
    with sessions() as session:
        stored = session.execute(
            select(InfluenceRow.position, InfluenceRow.delta, InfluenceRow.delta_sp, InfluenceRow.delta_eo,
                   InfluenceRow.settled, InfluenceRow.no_minimum)
            .where(InfluenceRow.audit_id == uuid.UUID(undefined_audit))
            .order_by(InfluenceRow.position)
        ).all()  # fmt: skip
    assert [r.position for r in stored if r.no_minimum is True] == list(UNDEFINED)
    assert all(r.no_minimum is None for r in stored if r.position not in UNDEFINED)  # null, never false
    for r in stored:  # null deltas, all three, exactly on those rows: never 0
        assert (r.delta is None, r.delta_sp is None, r.delta_eo is None) == (r.position in UNDEFINED,) * 3
    items = walk(client, auth, undefined_audit, "node", 200)
    assert items == sorted((served(r) for r in node_rows()), key=lambda r: r["node_index"])
    one = next(i for i in items if i["position"] == UNDEFINED[0])
    assert one["delta"] is None and one["delta_sp"] is None and one["delta_eo"] is None
    assert one["no_minimum"] is True and one["settled"] is False
    other = next(i for i in items if i["position"] == 0)
    assert "no_minimum" in other and other["no_minimum"] is None and isinstance(other["delta"], float)


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 6, 7, DEFINED - 1, DEFINED, DEFINED + 1, 200])
def test_rows_without_a_value_come_last_in_both_orders(
    client: TestClient, auth: dict[str, str], undefined_audit: str, limit: int
) -> None:
    """Every page visits every row once, across the boundary into the rows without a value and within them."""
    rows = node_rows()
    harmful, helpful = (
        walk(client, auth, undefined_audit, "harmful", limit),
        walk(client, auth, undefined_audit, "helpful", limit),
    )
    for items in (harmful, helpful):
        assert sorted(i["position"] for i in items) == list(range(M))  # each row exactly once
        assert [i["position"] for i in items[DEFINED:]] == list(UNDEFINED)  # last, by position
        assert all(i["delta"] is None for i in items[DEFINED:]) and None not in [i["delta"] for i in items[:DEFINED]]
    assert harmful == harmful_order(rows)
    assert helpful == helpful_order(rows)
    assert walk(client, auth, undefined_audit, "node", limit) == sorted(
        (served(r) for r in rows), key=lambda r: r["node_index"]
    )


def token_key(token: str) -> list[Any]:
    doc = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    key: list[Any] = doc["v"]
    return key


@pytest.mark.parametrize("order", ["harmful", "helpful"])
def test_tokens_into_the_rows_without_a_value_carry_a_null_delta(
    client: TestClient, auth: dict[str, str], undefined_audit: str, order: str
) -> None:
    url = f"/v1/audits/{undefined_audit}/influence"
    first = client.get(url, headers=auth, params={"order": order, "limit": DEFINED + 2}).json()
    assert [i["position"] for i in first["items"][DEFINED:]] == list(UNDEFINED[:2])
    assert token_key(first["next_page_token"]) == [None, UNDEFINED[1]]
    boundary = client.get(url, headers=auth, params={"order": order, "limit": DEFINED}).json()
    last = boundary["items"][-1]  # the last row with a value: its own key, the next page begins the nulls
    assert token_key(boundary["next_page_token"]) == [last["delta"], last["position"]]
    after = client.get(url, headers=auth, params={"order": order, "page_token": boundary["next_page_token"]}).json()
    assert [i["position"] for i in after["items"]] == list(UNDEFINED) and after["next_page_token"] is None

    def page(key: list[Any]) -> list[int]:
        response = client.get(
            url, headers=auth, params={"order": order, "page_token": forge_token(f"influence:{order}", key)}
        )
        assert response.status_code == 200, response.text
        return [i["position"] for i in response.json()["items"]]

    assert page([None, 5]) == [11, 17, 22]
    assert page([None, -1]) == list(UNDEFINED)
    assert page([None, 22]) == []
    for bad in ([None, None], [None, 1.5], [None, 2**70], [None, "1"]):
        params = {"order": order, "page_token": forge_token(f"influence:{order}", bad)}
        assert_problem(client.get(url, headers=auth, params=params), 400, "invalid-page-token")
    params = {"order": "node", "page_token": forge_token("influence:node", [None, 1])}
    assert_problem(client.get(url, headers=auth, params=params), 400, "invalid-page-token")


def test_an_audit_whose_rows_all_lack_a_value(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]
) -> None:
    audit_id = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"]
    key = uuid.UUID(audit_id)
    rows = [
        NodeRow(position=p, node_index=p, node_id=p, group=0, label=0, delta=None, delta_sp=None, delta_eo=None,
                settled=False, no_minimum=True)
        for p in range(5)
    ]  # fmt: skip
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == key).values(state="running", attempts=1))
        assert succeed(session, Claim(key, 1, None, None, {}), results={}, weights=None, model_config=None,
                       influence=rows) is Lease.HELD  # fmt: skip
    for order in ("harmful", "helpful"):
        assert walk(client, auth, audit_id, order, 2) == [served(r) for r in rows]
    answer = client.post(f"/v1/audits/{audit_id}/what-if", headers=auth, json={"top": 3})
    assert_problem(answer, 422, "validation-error")  # no value to rank: named, not a 500


def test_exports_of_rows_without_a_value(client: TestClient, auth: dict[str, str], undefined_audit: str) -> None:
    """CSV: the deltas' cells empty and no_minimum `true` (empty on the other rows); Parquet: nulls, a nullable
    boolean column. The columns are bind_core's."""
    csv_response = client.get(f"/v1/audits/{undefined_audit}/influence.csv", headers=auth)
    assert csv_response.status_code == 200, csv_response.text
    lines = list(csv.reader(io.StringIO(csv_response.text)))
    assert tuple(lines[0]) == INFLUENCE_COLUMNS
    assert INFLUENCE_COLUMNS[-4:] == ("settled", "no_minimum", "group_name", "label_name")
    cells = {int(line[0]): dict(zip(INFLUENCE_COLUMNS, line, strict=True)) for line in lines[1:]}
    assert sorted(cells) == list(range(M))
    for p, cell in cells.items():
        deltas = (cell["delta"], cell["delta_sp"], cell["delta_eo"])
        if p in UNDEFINED:
            assert deltas == ("", "", "") and cell["no_minimum"] == "true" and cell["settled"] == "false"
        else:
            assert all(float(d) == float(d) for d in deltas) and cell["no_minimum"] == "" and cell["settled"] == "true"
    parquet = client.get(f"/v1/audits/{undefined_audit}/influence.parquet", headers=auth)
    assert parquet.status_code == 200, parquet.text
    table = pq.read_table(io.BytesIO(parquet.content))
    assert tuple(table.column_names) == INFLUENCE_COLUMNS and table.schema.field("no_minimum").type == pa.bool_()
    records = sorted(table.to_pylist(), key=lambda r: r["position"])
    assert records == [served(r) for r in node_rows()]


def test_what_if_with_a_member_without_a_value(client: TestClient, auth: dict[str, str], undefined_audit: str) -> None:
    url = f"/v1/audits/{undefined_audit}/what-if"
    answer = client.post(url, headers=auth, json={"nodes": ["n0", f"n{UNDEFINED[0]}"]})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["delta"] is None and body["delta_sp"] is None and body["delta_eo"] is None
    assert body["size"] == 2 and "no ΔΓ" in body["note"]
    top = client.post(url, headers=auth, json={"top": 30}).json()
    assert top["nodes"] and not {f"n{p}" for p in UNDEFINED} & set(top["nodes"])
    assert isinstance(top["delta"], float)


def test_rows_that_cannot_be_stored_are_refused() -> None:
    """The worker fails an audit whose rows would store a NaN, or a null without its reason (or the reverse)."""
    valid = node_rows()
    check_influence_rows(valid)
    number, undefined = valid[0], valid[UNDEFINED[0]]
    for bad in (
        dataclasses.replace(number, delta=float("nan")),
        dataclasses.replace(number, delta_eo=float("inf")),
        dataclasses.replace(number, delta=None, delta_sp=None, delta_eo=None),  # null without no_minimum
        dataclasses.replace(number, delta=None),
        dataclasses.replace(number, no_minimum=True),  # the flag with numbers
        dataclasses.replace(undefined, delta_sp=0.0),
    ):
        with pytest.raises(ValueError, match=f"influence row {bad.position}"):
            check_influence_rows([*valid, bad])
