"""GET /v1/audits/{id}/report, /influence.csv, /influence.parquet and /export: content, auth, isolation, 409."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import pandas as pd
import pytest
from apihelp import assert_problem
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Audit, InfluenceRow
from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.reporting.exports import INFLUENCE_COLUMNS
from bind_core.training.fit import TrainConfig

ROUTES = ("report", "influence.csv", "influence.parquet", "export", "profile")


@pytest.fixture(scope="module")
def outcome() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A tiny real audit's stored results and influence rows (as JSON)."""
    config = AuditConfig(
        training=TrainConfig(epochs=30), validation_sample=3, bootstrap=100, stability_seeds=(10, 11), stability_k=4
    )
    result = run_audit(synthetic(120, seed=0, train_per_class=20), config)
    return json.loads(json.dumps(result.to_dict())), [encode(r) for r in result.influence_rows()]


def finish(sessions: sessionmaker[Session], audit_id: str, results: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Store an audit's outcome as the worker does: results, influence rows and ``succeeded`` together."""
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(audit_id)).values(state="succeeded", results=results))
        session.add_all(
            InfluenceRow(
                audit_id=uuid.UUID(audit_id),
                grp=r["group"],
                **{k: v for k, v in r.items() if k not in ("group", "group_name", "label_name")},
            )
            for r in rows
        )


@pytest.fixture
def audit_id(
    client: TestClient,
    auth: dict[str, str],
    graph_id: str,
    sessions: sessionmaker[Session],
    outcome: tuple[dict[str, Any], list[dict[str, Any]]],
) -> str:
    """A succeeded audit of the ``auth`` tenant; every route answers 409 before it succeeds."""
    audit_id = str(client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"])
    for route in ROUTES:
        assert_problem(client.get(f"/v1/audits/{audit_id}/{route}", headers=auth), 409, "audit-not-succeeded")
    finish(sessions, audit_id, *outcome)
    return audit_id


def test_report_page(
    client: TestClient, auth: dict[str, str], audit_id: str, outcome: tuple[dict[str, Any], list[dict[str, Any]]]
) -> None:
    response = client.get(f"/v1/audits/{audit_id}/report", headers=auth)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert response.headers["cache-control"] == "no-store"
    page = response.text
    assert page.startswith("<!DOCTYPE html>") and f"<title>BIND audit {audit_id}</title>" in page
    assert page.count("<svg") == 5 and "<script" not in page and 'id="top-harmful"' in page
    assert 'id="profile"' in page and "What the harmful nodes have in common" in page
    stability = outcome[0]["stability"]  # the top-k stability across seeds: numbers and the grid
    pair = stability["pairwise"][0]
    assert 'id="stability"' in page and 'id="stability-' in page and "Overlap of the top-4 harmful sets:" in page
    assert f"<td class=l>10 vs 11</td><td>{pair['intersection']}</td><td>{pair['union']}</td>" in page
    assert f"<td>{pair['jaccard']:.3f}</td>" in page


def test_influence_files(
    client: TestClient, auth: dict[str, str], audit_id: str, outcome: tuple[dict[str, Any], list[dict[str, Any]]]
) -> None:
    rows = outcome[1]
    csv = client.get(f"/v1/audits/{audit_id}/influence.csv", headers=auth)
    assert csv.status_code == 200 and csv.headers["content-type"] == "text/csv; charset=utf-8"
    assert csv.headers["content-disposition"] == f'attachment; filename="influence-{audit_id}.csv"'
    frame = pd.read_csv(io.StringIO(csv.text), dtype={"group_name": str, "label_name": str})
    assert list(frame.columns) == list(INFLUENCE_COLUMNS)
    flags = ["settled", "no_minimum"]
    assert frame["settled"].isna().all()  # the linear estimate: nothing settled, the cell empty (not false)
    assert frame["no_minimum"].isna().all()  # every node has a value: the cell empty (not false)
    assert frame.drop(columns=flags).to_dict("records") == rows
    assert {r["group_name"] for r in rows} == {"0", "1"}  # the graph names no group: the codes as text, as its summary
    parquet = client.get(f"/v1/audits/{audit_id}/influence.parquet", headers=auth)
    assert parquet.status_code == 200 and parquet.headers["content-type"] == "application/vnd.apache.parquet"
    table = pd.read_parquet(io.BytesIO(parquet.content))
    assert list(table.columns) == list(INFLUENCE_COLUMNS) and table[flags].isna().all().all()
    assert table.drop(columns=flags).to_dict("records") == rows


def test_report_and_files_with_rows_without_a_value(
    client: TestClient,
    auth: dict[str, str],
    graph_id: str,
    sessions: sessionmaker[Session],
    outcome: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    """Rows without a value (null deltas, no_minimum true) reach the report and the files as nulls: no 500."""
    results, rows = outcome
    undefined = {"delta": None, "delta_sp": None, "delta_eo": None, "settled": False, "no_minimum": True}
    mixed = [r | undefined if r["position"] % 5 == 2 else r for r in rows]
    audit_id = str(client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"])
    finish(sessions, audit_id, results, mixed)
    report = client.get(f"/v1/audits/{audit_id}/report", headers=auth)
    assert report.status_code == 200, report.text
    frame = pd.read_csv(io.StringIO(client.get(f"/v1/audits/{audit_id}/influence.csv", headers=auth).text))
    gone = frame["position"] % 5 == 2
    assert gone.any() and frame.loc[gone, ["delta", "delta_sp", "delta_eo"]].isna().all().all()
    assert (frame.loc[gone, "no_minimum"] == True).all() and frame.loc[~gone, "no_minimum"].isna().all()  # noqa: E712
    assert frame.loc[~gone, ["delta", "delta_sp", "delta_eo"]].notna().all().all()
    table = pd.read_parquet(io.BytesIO(client.get(f"/v1/audits/{audit_id}/influence.parquet", headers=auth).content))
    assert table.loc[table["position"] % 5 == 2, "delta"].isna().all()
    assert table["no_minimum"].sum() == gone.sum()


def test_export(
    client: TestClient, auth: dict[str, str], audit_id: str, outcome: tuple[dict[str, Any], list[dict[str, Any]]]
) -> None:
    response = client.get(f"/v1/audits/{audit_id}/export", headers=auth)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["format"] == "bind-audit/model-card-quantitative-analysis/v1" and body["audit_id"] == audit_id
    metrics = body["quantitative_analysis"]["performance_metrics"]
    accuracy = next(m for m in metrics if m["type"] == "accuracy" and m["slice"] == "test")
    assert accuracy["value"] == outcome[0]["metrics"]["test"]["accuracy"]
    assert set(accuracy["confidence_interval"]) == {"lower_bound", "upper_bound"}
    per_group = [m for m in metrics if m["slice"].startswith("group=")]
    assert per_group and all(m["group_name"] is not None and m["included"] is not None for m in per_group)
    assert body["influence"]["count"] == len(outcome[1]) and len(body["debiasing"]) == 2


def test_profile(
    client: TestClient,
    auth: dict[str, str],
    audit_id: str,
    graph_id: str,
    sessions: sessionmaker[Session],
    outcome: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    """The stored profile, as stored; 409 for a succeeded audit without one (no influence stage)."""
    response = client.get(f"/v1/audits/{audit_id}/profile", headers=auth)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body == outcome[0]["profile"]
    assert body["sets"]["all"]["nodes"] == len(outcome[1]) and "criterion" in body["search"]
    without = str(client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"])
    finish(sessions, without, {k: v for k, v in outcome[0].items() if k != "profile"}, [])
    assert_problem(client.get(f"/v1/audits/{without}/profile", headers=auth), 409, "profile-not-computed")


def test_auth_isolation_and_missing_rows(
    client: TestClient,
    auth: dict[str, str],
    other_auth: dict[str, str],
    graph_id: str,
    sessions: sessionmaker[Session],
    outcome: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    audit_id = str(client.post("/v1/audits", headers=auth, json={"graph_id": graph_id}).json()["id"])
    finish(sessions, audit_id, outcome[0], [])  # succeeded, but without influence rows
    for route in ROUTES:
        url = f"/v1/audits/{audit_id}/{route}"
        assert_problem(client.get(url), 401, "unauthorized")
        assert_problem(client.get(url, headers={"Authorization": "Bearer bind_nope"}), 401)
        assert_problem(client.get(url, headers=other_auth), 404, "audit-not-found")
        assert_problem(client.get(f"/v1/audits/{uuid.uuid4()}/{route}", headers=auth), 404, "audit-not-found")
    for route in ("influence.csv", "influence.parquet"):
        assert_problem(client.get(f"/v1/audits/{audit_id}/{route}", headers=auth), 409, "influence-not-ready")
    page = client.get(f"/v1/audits/{audit_id}/report", headers=auth)  # the report falls back to the summary
    assert page.status_code == 200 and page.text.count("<svg") == 4
    assert client.get(f"/v1/audits/{audit_id}/export", headers=auth).status_code == 200


def test_openapi_declares_the_routes(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    media = {"report": "text/html", "influence.csv": "text/csv", "influence.parquet": "application/vnd.apache.parquet"}
    for route in ROUTES:
        responses = paths[f"/v1/audits/{{audit_id}}/{route}"]["get"]["responses"]
        assert {"200", "401", "404", "409"} <= set(responses)
        assert "application/problem+json" in responses["409"]["content"]
        assert media.get(route, "application/json") in responses["200"]["content"]
