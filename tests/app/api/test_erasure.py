"""Erasure and retention: after ``DELETE /v1/graphs/{id}?purge=true`` a scan of every table of the metadata finds no
row naming the graph or any of its audits (the trail aside, which keeps the bare paths), and no upload file is
left; ``DELETE /v1/audits/{id}`` erases one audit; ``BIND_RETENTION_DAYS`` erases what is older."""

from __future__ import annotations

import json
import tempfile
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from apihelp import assert_problem
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.session import now
from app.core.db.tables import (
    Audit,
    Base,
    EdgeInfluenceRow,
    Graph,
    InfluenceChunkRecord,
    InfluencePlanRecord,
    InfluenceRow,
    Schedule,
    SuppliedModel,
    TrailEvent,
    Webhook,
    WebhookDelivery,
)
from app.erasure.retention import expire

RESULTS = {"metrics": {"test": {"accuracy": 0.8}}, "profile": {"features": {"age": [1, 2, 3]}}}


def derive(sessions: sessionmaker[Session], tenant_id: uuid.UUID, graph_id: uuid.UUID, state: str) -> uuid.UUID:
    """Everything an audit of the graph leaves: a schedule run with results, node and edge rows, a distributed
    estimate's plan and chunk, a supplied model, and a webhook delivery naming it; return the audit's id."""
    with sessions.begin() as session:
        model = SuppliedModel(tenant_id=tenant_id, graph_id=graph_id, name="m", config={}, weights=b"w", size_bytes=1)
        schedule = Schedule(tenant_id=tenant_id, graph_name="g", settings={}, config={}, interval_seconds=3600,
                            next_run_at=now())  # fmt: skip
        session.add_all([model, schedule])
        session.flush()
        audit = Audit(tenant_id=tenant_id, graph_id=graph_id, model_id=model.id, schedule_id=schedule.id,
                      slot_time=now(), config={}, request_hash="0" * 64, state=state, results=RESULTS,
                      model_weights=b"weights")  # fmt: skip
        session.add(audit)
        session.flush()
        session.add(InfluenceRow(audit_id=audit.id, position=0, node_index=3, node_id=30, grp=1, label=0, delta=-0.1,
                                 delta_sp=-0.05, delta_eo=-0.05))  # fmt: skip
        session.add(EdgeInfluenceRow(audit_id=audit.id, position=0, u_index=0, v_index=1, u_id=0, v_id=1, u_grp=0,
                                     v_grp=1, within_group=False, affects=True, delta=0.1, delta_sp=0.0,
                                     delta_eo=0.1))  # fmt: skip
        plan = InfluencePlanRecord(audit_id=audit.id, attempt=1, plan=b"p", model_weights=b"w", model_config={},
                                   chunks=1)  # fmt: skip
        session.add(plan)
        session.flush()
        session.add(InfluenceChunkRecord(plan_id=plan.id, idx=0, start=0, stop=1))
        hook = Webhook(tenant_id=tenant_id, url="https://8.8.8.8/h", events=["audit.succeeded"], secret="whsec_x")
        session.add(hook)
        session.flush()
        data = {"audit_id": str(audit.id), "graph_id": str(graph_id), "metrics": {"accuracy": 0.8}}
        session.add(WebhookDelivery(webhook_id=hook.id, event="audit.succeeded",
                                    payload={"type": "audit.succeeded", "data": data}))  # fmt: skip
        return audit.id


def rows_naming(sessions: sessionmaker[Session], ids: set[str]) -> dict[str, int]:
    """For every table of the metadata but the trail, how many rows hold one of ``ids`` in any column (JSON
    documents searched as text, blobs as bytes)."""
    found: dict[str, int] = {}
    with sessions() as session:
        for table in Base.metadata.sorted_tables:
            if table.name == TrailEvent.__tablename__:
                continue
            hits = 0
            for row in session.execute(select(table)).mappings():
                text = json.dumps({k: v for k, v in row.items() if not isinstance(v, bytes)}, default=str)
                blobs = b"".join(v for v in row.values() if isinstance(v, bytes))
                hits += any(i in text or i.encode() in blobs for i in ids)
            found[table.name] = hits
    return found


def upload_files() -> set[Path]:
    """The service's upload folders in the temporary directory (made per request, removed after it)."""
    tmp = Path(tempfile.gettempdir())
    return {*tmp.glob("bind-upload-*"), *tmp.glob("bind-model-*")}


def tenant_of(sessions: sessionmaker[Session], graph_id: str) -> uuid.UUID:
    with sessions() as session:
        tenant = session.scalar(select(Graph.tenant_id).where(Graph.id == uuid.UUID(graph_id)))
        assert tenant is not None
        return tenant


def test_a_purge_leaves_no_row_and_no_file_naming_the_graph_or_its_audits(
    client: TestClient, sessions: sessionmaker[Session], auth: dict[str, str], other_auth: dict[str, str],
    graph_npz: bytes,
) -> None:  # fmt: skip
    files_before = upload_files()
    ids = {}
    for name, headers in (("purged", auth), ("kept", other_auth)):
        graph_id = client.post("/v1/graphs", headers=headers, files={"npz": ("g.npz", graph_npz)}).json()["id"]
        tenant = tenant_of(sessions, graph_id)
        audits = {derive(sessions, tenant, uuid.UUID(graph_id), state) for state in ("succeeded", "running")}
        ids[name] = {graph_id, *(str(a) for a in audits)}
    purged_graph = next(i for i in ids["purged"] if client.get(f"/v1/graphs/{i}", headers=auth).status_code == 200)
    assert sum(rows_naming(sessions, ids["purged"]).values()) >= 10  # the scan sees what is there

    response = client.delete(f"/v1/graphs/{purged_graph}", headers=auth, params={"purge": "true"})
    assert response.status_code == 204, response.text

    assert rows_naming(sessions, ids["purged"]) == {t.name: 0 for t in Base.metadata.sorted_tables
                                                    if t.name != TrailEvent.__tablename__}  # fmt: skip
    assert upload_files() <= files_before
    kept = rows_naming(sessions, ids["kept"])  # another tenant's graph and audits are untouched
    assert kept["graphs"] == 1 and kept["audits"] == 2 and kept["influence_rows"] == 2
    with sessions() as session:  # the trail keeps that the graph was purged, by its path only
        entries = session.scalars(
            select(TrailEvent).where(TrailEvent.target == f"/graphs/{purged_graph}").order_by(TrailEvent.created_at)
        ).all()
        assert [(e.action, e.outcome) for e in entries] == [("graph.upload", "succeeded"), ("graph.purge", "succeeded")]
    assert_problem(client.get(f"/v1/graphs/{purged_graph}", headers=auth), 404)


def test_deleting_a_graph_without_purge_still_keeps_its_finished_audits(
    client: TestClient, sessions: sessionmaker[Session], auth: dict[str, str], graph_id: str
) -> None:
    audit_id = derive(sessions, tenant_of(sessions, graph_id), uuid.UUID(graph_id), "succeeded")
    assert client.delete(f"/v1/graphs/{graph_id}", headers=auth).status_code == 204
    assert client.get(f"/v1/audits/{audit_id}", headers=auth).json()["graph_id"] is None


def test_deleting_an_audit_erases_its_rows(
    client: TestClient, sessions: sessionmaker[Session], auth: dict[str, str], graph_id: str
) -> None:
    audit_id = derive(sessions, tenant_of(sessions, graph_id), uuid.UUID(graph_id), "succeeded")
    assert client.delete(f"/v1/audits/{audit_id}", headers=auth).status_code == 204
    found = rows_naming(sessions, {str(audit_id)})
    assert sum(found.values()) == 0, found
    assert client.get(f"/v1/graphs/{graph_id}", headers=auth).status_code == 200  # the graph stays
    assert_problem(client.delete(f"/v1/audits/{audit_id}", headers=auth), 404, "audit-not-found")


def test_another_tenant_cannot_erase(
    client: TestClient, sessions: sessionmaker[Session], auth: dict[str, str], other_auth: dict[str, str], graph_id: str
) -> None:
    audit_id = derive(sessions, tenant_of(sessions, graph_id), uuid.UUID(graph_id), "succeeded")
    assert_problem(client.delete(f"/v1/audits/{audit_id}", headers=other_auth), 404)
    assert_problem(client.delete(f"/v1/graphs/{graph_id}?purge=true", headers=other_auth), 404)
    assert client.get(f"/v1/audits/{audit_id}", headers=auth).status_code == 200


def test_retention_erases_what_is_older_and_records_it(
    client: TestClient, sessions: sessionmaker[Session], auth: dict[str, str], graph_npz: bytes
) -> None:
    def upload() -> tuple[str, uuid.UUID]:
        graph_id = client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", graph_npz)}).json()["id"]
        return graph_id, derive(sessions, tenant_of(sessions, graph_id), uuid.UUID(graph_id), "succeeded")

    (old_graph, old_audit), (busy_graph, _), (new_graph, new_audit) = upload(), upload(), upload()
    long_ago = now() - timedelta(days=40)
    with sessions.begin() as session:
        for graph in (old_graph, busy_graph):
            session.execute(update(Graph).where(Graph.id == uuid.UUID(graph)).values(created_at=long_ago))
        session.execute(update(Audit).where(Audit.id == old_audit).values(finished_at=long_ago))
        session.execute(update(Audit).where(Audit.id == new_audit).values(finished_at=now()))
        session.add(Audit(tenant_id=tenant_of(sessions, busy_graph), graph_id=uuid.UUID(busy_graph), config={},
                          request_hash="0" * 64, state="running"))  # fmt: skip

    assert expire(sessions, 0).audits == 0  # 0: keep everything
    done = expire(sessions, 30)
    assert done.audits >= 1 and done.graphs >= 1

    def exists(path: str) -> bool:
        return client.get(path, headers=auth).status_code == 200

    assert not exists(f"/v1/audits/{old_audit}") and not exists(f"/v1/graphs/{old_graph}")
    assert exists(f"/v1/graphs/{busy_graph}")  # a queued or running audit holds its graph until it ends
    assert exists(f"/v1/graphs/{new_graph}") and exists(f"/v1/audits/{new_audit}")
    with sessions() as session:
        entries = session.scalars(
            select(TrailEvent).where(TrailEvent.target.in_([f"/audits/{old_audit}", f"/graphs/{old_graph}"]),
                                     TrailEvent.actor == "system")
        ).all()  # fmt: skip
    assert sorted(e.action for e in entries) == ["audit.expire", "graph.expire"]
    assert all(e.actor_key_id is None and e.outcome == "succeeded" for e in entries)


@pytest.mark.parametrize("path", ["/v1/audits/{id}", "/v1/graphs/{id}?purge=true"])
def test_erasing_needs_an_admin_key(
    client: TestClient, sessions: sessionmaker[Session], path: str, graph_npz: bytes
) -> None:
    from app.tenants.keys import create_api_key

    name = f"erase-{uuid.uuid4().hex[:8]}"
    with sessions.begin() as session:
        keys: dict[str, Any] = {"admin": create_api_key(session, name)}
        keys["auditor"] = create_api_key(session, name, "auditor")
    headers = {role: {"Authorization": f"Bearer {key}"} for role, key in keys.items()}
    graph_id = client.post("/v1/graphs", headers=headers["auditor"], files={"npz": ("g.npz", graph_npz)}).json()["id"]
    target = graph_id if "graphs" in path else str(derive(sessions, tenant_of(sessions, graph_id), uuid.UUID(graph_id),
                                                          "succeeded"))  # fmt: skip
    url = path.replace("{id}", target)
    assert_problem(client.delete(url, headers=headers["auditor"]), 403, "role-not-allowed")
    assert client.delete(url, headers=headers["admin"]).status_code == 204


def test_concurrent_sweeps_record_each_erasure_once(
    client: TestClient, sessions: sessionmaker[Session], auth: dict[str, str], graph_id: str
) -> None:
    """Every worker sweeps: a sweep that finds the row already erased by another records nothing."""
    from app.erasure.service import erase_audits

    tenant = tenant_of(sessions, graph_id)
    audit_id = derive(sessions, tenant, uuid.UUID(graph_id), "succeeded")
    with sessions.begin() as session:
        assert erase_audits(session, tenant, [audit_id]) == [audit_id]
    with sessions.begin() as session:
        assert erase_audits(session, tenant, [audit_id]) == []
