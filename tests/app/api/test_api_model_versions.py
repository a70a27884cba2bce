"""A supplied model on later versions of its graph: a schedule audits it on each new version (``model_id``), an audit
names the version (``graph_name``), and the worker carries the version's inputs over to what the model was registered
with (columns by name, the registration's scaling) or fails the audit naming what differs."""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
from apihelp import assert_problem, fields, run_alone
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.base import utcnow
from app.core.db.tables import Audit
from app.core.db.tables import Graph as GraphRow
from app.core.settings import Settings
from app.schedules.scheduler import tick
from app.what_ifs import run as what_ifs
from bind_core import Graph
from bind_core.data.datasets import ingest_files, load_npz
from bind_core.pipeline import InputSchema, carry_inputs
from bind_core.training.fit import TrainConfig, train

CHEAP = {"budgets": [1], "validation_sample": 5, "bootstrap": 0}


def _table(n: int, seed: int, *, shift: float = 0.0, columns: tuple[str, ...] = ("age", "score", "tenure")) -> str:
    """A node table of ``n`` clients whose label leans on age and score; ``shift`` makes every client older."""
    rng = np.random.default_rng(seed)
    age, score, tenure = rng.uniform(20, 70, n) + shift, rng.normal(0, 2, n), rng.integers(0, 20, n)
    values = {"age": age, "score": score, "tenure": tenure}
    label = ((age - shift - 45) / 10 + score + rng.normal(0, 0.5, n) > 0).astype(int)
    rows = [f"{i}," + ",".join(f"{values[c][i]:.3f}" for c in columns) + f",{'fm'[i % 2]},{label[i]}" for i in range(n)]
    return "id," + ",".join(columns) + ",gender,label\n" + "\n".join(rows) + "\n"


def _edges(n: int) -> str:
    return "".join(f"{i},{(i + 1) % n}\n{i},{(i + 7) % n}\n" for i in range(n))


def _upload(client: TestClient, auth: dict[str, str], table: str, n: int, name: str = "clients") -> dict[str, Any]:
    response = client.post(
        "/v1/graphs",
        headers=auth,
        files={"nodes": ("t.csv", table.encode()), "edges": ("e.csv", _edges(n).encode())},
        data={"label": "label", "sensitive": "gender", "node_id": "id", "name": name},
    )  # features min-max scaled by each version's own ranges: the upload's default
    assert response.status_code == 201, response.text
    return dict(response.json())


def _register(client: TestClient, auth: dict[str, str], tmp_path: Path, table: str, graph_id: str, n: int) -> str:
    """A model trained on the first version's features, scaled as the upload scaled them, registered for it."""
    (tmp_path / "t.csv").write_text(table)
    (tmp_path / "e.csv").write_text(_edges(n))
    graph = ingest_files(
        tmp_path / "t.csv", tmp_path / "e.csv", label="label", sensitive="gender", node_id="id", scale=True
    ).graph
    torch.manual_seed(0)
    model = train(graph, TrainConfig(epochs=60, polish=False))
    response = client.post(
        "/v1/models",
        headers=auth,
        files={"weights": ("m.safetensors", model.to_bytes())},
        data={"config": json.dumps(model.config_dict()), "graph_id": graph_id, "name": "credit"},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _run(
    client: TestClient, auth: dict[str, str], sessions: sessionmaker[Session], settings: Settings, audit_id: str
) -> dict[str, Any]:
    """Run the audit (setting aside what other tests left queued) and read it back."""
    return run_alone(client, auth, audit_id, sessions, settings)[1]


def test_a_schedule_audits_the_model_on_each_new_version(
    client: TestClient,
    auth: dict[str, str],
    sessions: sessionmaker[Session],
    settings: Settings,
    tmp_path: Path,
) -> None:
    n = 64
    first = _table(n, 1)
    v1 = _upload(client, auth, first, n)
    model_id = _register(client, auth, tmp_path, first, v1["id"], n)
    created = client.post(
        "/v1/schedules", headers=auth, json={"model_id": model_id, "interval_seconds": 3600, "audit": CHEAP}
    )
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert (schedule["graph_name"], schedule["model_id"]) == ("clients", model_id)
    assert schedule["settings"] == CHEAP
    # A new version: older clients (other minima and maxima, so the upload scaled them otherwise), columns reordered.
    v2 = _upload(client, auth, _table(n, 2, shift=12.0, columns=("tenure", "score", "age")), n)
    assert v2["version"] == 2
    with sessions.begin() as session:  # the slot comes
        session.execute(update(Audit).where(Audit.state == "queued").values(state="cancelled"))
    queued = tick(sessions, utcnow() + timedelta(seconds=1))
    with sessions() as session:
        audit_row = session.scalars(select(Audit).where(Audit.schedule_id == uuid.UUID(schedule["id"]))).one()
        assert audit_row.id in queued
        assert (str(audit_row.model_id), audit_row.graph_version) == (model_id, 2)
        assert audit_row.config["model"]["hidden"] is not None  # describes the supplied model, not a default
    audit = _run(client, auth, sessions, settings, str(audit_row.id))
    assert audit["state"] == "succeeded", audit.get("error")
    carried = audit["results"]["supplied_model"]["carried"]
    assert (carried["registered_graph_id"], carried["registered_version"]) == (v1["id"], 1)
    assert carried["columns_named"] and carried["columns_reordered"] and carried["rescaled"]
    assert carried["scaled_as_registered"]
    attribution = audit["results"]["summary"]["attribution"]
    assert attribution is None or "refit on this version" in attribution["text"]
    runs = client.get(f"/v1/schedules/{schedule['id']}/runs", headers=auth).json()["items"]
    assert [(r["graph_version"], r["state"]) for r in runs] == [(2, "succeeded")]
    report = client.get(f"/v1/schedules/{schedule['id']}/report", headers=auth).text
    assert f"supplied model &#39;credit&#39; ({model_id}) on the graph &#39;clients&#39;" in report, report[:3000]
    assert runs[0]["warning_codes"] == audit["warning_codes"] and runs[0]["failure"] is None
    assert runs[0]["withheld"] == audit["results"]["summary"].get("withheld")
    assert runs[0]["inputs_confirmed"] is False  # carried over, not confirmed: no outputs given for this version
    _verifying_retrains_on_the_carried_version(client, auth, sessions, settings, audit["id"], v1["id"], v2["id"])
    # The budget's retrained model read the version as the registration did: it is registered for that version.
    kept = client.get(f"/v1/audits/{audit['id']}/models", headers=auth).json()["items"]
    assert kept, "the debiasing budget keeps its retrained model"
    registered = client.post(f"/v1/audits/{audit['id']}/models/{kept[0]['id']}/register", headers=auth)
    assert registered.status_code == 201, registered.text
    assert registered.json()["graph_id"] == v1["id"]  # not v2's: its columns and scaling are the registration's

    # A version without one of the model's columns fails the audit, naming the column; the run history says so.
    _upload(client, auth, _table(n, 3, columns=("age", "tenure")), n)
    client.post(f"/v1/schedules/{schedule['id']}/pause", headers=auth)
    client.post(f"/v1/schedules/{schedule['id']}/resume", headers=auth)  # an interval schedule runs at once
    queued = tick(sessions, utcnow() + timedelta(seconds=1))
    with sessions() as session:
        slot = session.scalars(
            select(Audit).where(Audit.schedule_id == uuid.UUID(schedule["id"]), Audit.graph_version == 3)
        ).one()
    failed = _run(client, auth, sessions, settings, str(slot.id))
    assert failed["state"] == "failed"
    assert failed["error"]["type"].endswith("/model-does-not-fit"), failed["error"]
    assert "lacks the model's column(s) 'score'" in failed["error"]["detail"]
    latest = client.get(f"/v1/schedules/{schedule['id']}/runs", headers=auth).json()["items"][0]
    assert latest["graph_version"] == 3 and latest["failure"].startswith("model-does-not-fit: ")
    assert "model-does-not-fit: " in client.get(f"/v1/schedules/{schedule['id']}/report", headers=auth).text
    client.post(f"/v1/schedules/{schedule['id']}/pause", headers=auth)
    # An audit may name the version by the graph's name: its latest.
    queued_now = client.post("/v1/audits", headers=auth, json={"model_id": model_id, "graph_name": "clients", **CHEAP})
    assert queued_now.status_code == 202, queued_now.text
    assert queued_now.json()["graph_version"] == 3
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(queued_now.json()["id"])).values(state="cancelled"))


def test_a_model_schedule_is_checked_when_created_and_when_its_slot_comes(
    client: TestClient, auth: dict[str, str], sessions: sessionmaker[Session], tmp_path: Path, graph_npz: bytes
) -> None:
    n = 40
    table = _table(n, 4)
    v1 = _upload(client, auth, table, n)
    model_id = _register(client, auth, tmp_path, table, v1["id"], n)
    other = client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", graph_npz)}, data={"name": "other"})
    assert other.status_code == 201, other.text

    def refused(body: dict[str, Any]) -> set[str]:
        return fields(assert_problem(client.post("/v1/schedules", headers=auth, json=body), 422))

    hourly = {"model_id": model_id, "interval_seconds": 3600}
    assert refused({**hourly, "graph_name": "other"}) == {"graph_name"}
    assert refused({**hourly, "audit": {"model": {"arch": "sage"}}}) == {"audit.model"}
    assert refused({**hourly, "audit": {"training": {"epochs": 5}}}) == {"audit.training.epochs"}
    assert refused({**hourly, "model_id": str(uuid.uuid4())}) == {"model_id"}
    assert_problem(client.post("/v1/schedules", headers=auth, json={**hourly, "dataset": "toy"}), 422)
    # An audit of the model on another graph's version is refused, naming the graph.
    elsewhere = client.post("/v1/audits", headers=auth, json={"model_id": model_id, "graph_name": "other"})
    assert fields(assert_problem(elsewhere, 422)) == {"graph_name"}

    created = client.post("/v1/schedules", headers=auth, json={**hourly, "graph_name": "clients"})
    assert created.status_code == 201, created.text
    assert client.delete(f"/v1/models/{model_id}", headers=auth).status_code == 204
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.state == "queued").values(state="cancelled"))
    tick(sessions, utcnow() + timedelta(seconds=1))
    with sessions() as session:
        audit = session.scalars(select(Audit).where(Audit.schedule_id == uuid.UUID(created.json()["id"]))).one()
    assert audit.state == "failed" and audit.model_id is None and audit.error is not None
    assert audit.error["type"].endswith("/model-not-found")
    assert model_id in audit.error["detail"]
    client.post(f"/v1/schedules/{created.json()['id']}/pause", headers=auth)


class _Seen(Exception):
    """Stops the verification once it has been handed its graph."""


def _verifying_retrains_on_the_carried_version(
    client: TestClient,
    auth: dict[str, str],
    sessions: sessionmaker[Session],
    settings: Settings,
    audit_id: str,
    first: str,
    later: str,
) -> None:
    """A what-if's verification loads the audit's graph again: it must be the version as the audit read it."""
    job = client.post(f"/v1/audits/{audit_id}/what-if", headers=auth, json={"verify": True, "top": 2})
    assert job.status_code == 202, job.text
    handed: list[Graph] = []

    def capture(*args: Any, **kwargs: Any) -> Any:
        handed.append(args[2])
        raise _Seen

    what_ifs.execute(job.json()["id"], sessions=sessions, settings=settings, device="cpu", compute=capture)
    with sessions() as session:
        ours = select(GraphRow).where(GraphRow.id.in_([uuid.UUID(first), uuid.UUID(later)]))  # not other tests' rows
        stored = {str(r.id): load_npz(io.BytesIO(r.data)) for r in session.scalars(ours)}
    expected, _ = carry_inputs(stored[later], InputSchema.of(stored[first]))
    (graph,) = handed
    assert graph.feature_names == stored[first].feature_names != stored[later].feature_names
    assert torch.equal(graph.x, expected.x)


def _regions(n: int, seed: int, regions: tuple[str, ...]) -> str:
    """A node table with a categorical ``region`` (one-hot encoded at upload: ``region=east``...) beside two numbers."""
    rng = np.random.default_rng(seed)
    age, score = rng.uniform(20, 70, n), rng.normal(0, 2, n)
    region = [regions[i % len(regions)] for i in range(n)]
    label = ((age - 45) / 10 + score > 0).astype(int)
    rows = [f"{i},{age[i]:.3f},{score[i]:.3f},{region[i]},{'fm'[i % 2]},{label[i]}" for i in range(n)]
    return "id,age,score,region,gender,label\n" + "\n".join(rows) + "\n"


def test_a_region_the_model_never_saw_is_refused_or_read_as_none_as_the_registration_says(
    client: TestClient, auth: dict[str, str], sessions: sessionmaker[Session], settings: Settings, tmp_path: Path
) -> None:
    """A registration names what a later version's unseen category becomes: ``refuse`` (the default: the audit fails
    naming the column and the way out) or ``ignore`` (its nodes read as none of the model's regions; recorded)."""
    n = 60
    first = _regions(n, 4, ("east", "north"))
    v1 = _upload(client, auth, first, n, name="regions")
    (tmp_path / "t.csv").write_text(first)
    (tmp_path / "e.csv").write_text(_edges(n))
    graph = ingest_files(
        tmp_path / "t.csv", tmp_path / "e.csv", label="label", sensitive="gender", node_id="id", scale=True
    ).graph
    assert graph.feature_names == ("age", "score", "region=east", "region=north", "gender")
    model = train(graph, TrainConfig(epochs=40, polish=False))

    def register(**extra: str) -> Any:
        data = {"config": json.dumps(model.config_dict()), "graph_id": v1["id"], "name": "regional", **extra}
        return client.post("/v1/models", headers=auth, files={"weights": ("m.st", model.to_bytes())}, data=data)

    strict, lenient = register().json(), register(unknown_categories="ignore").json()
    assert (strict["unknown_categories"], lenient["unknown_categories"]) == ("refuse", "ignore")
    assert client.get(f"/v1/models/{lenient['id']}", headers=auth).json()["unknown_categories"] == "ignore"
    assert fields(assert_problem(register(unknown_categories="skip"), 422)) == {"unknown_categories"}
    _upload(
        client, auth, _regions(n, 5, ("east", "north", "west")), n, name="regions"
    )  # a third of the clients from the west

    def audit(model_id: str) -> dict[str, Any]:
        queued = client.post("/v1/audits", headers=auth, json={"model_id": model_id, "graph_name": "regions", **CHEAP})
        assert queued.status_code == 202, queued.text
        return _run(client, auth, sessions, settings, queued.json()["id"])

    refused = audit(strict["id"])
    assert refused["state"] == "failed" and refused["error"]["type"].endswith("/model-does-not-fit")
    assert "'region=west'" in refused["error"]["detail"]
    assert "unknown_categories 'ignore'" in refused["error"]["detail"]
    read = audit(lenient["id"])
    assert read["state"] == "succeeded", read.get("error")
    carried = read["results"]["supplied_model"]["carried"]
    assert (carried["ignored"], carried["ignored_nodes"]) == (["region=west"], n // 3)
    assert "'region=west', left out as its registration asks" in carried["text"]
    assert "unseen_categories" in read["warning_codes"]  # a platform hears of the new region (audit.warned)
    said = read["warnings"][read["warning_codes"].index("unseen_categories")]
    assert said.startswith(f"{n // 3} nodes of this version have a category the model was never registered with")
    kept = client.get(f"/v1/audits/{read['id']}/models", headers=auth).json()["items"]
    again = client.post(f"/v1/audits/{read['id']}/models/{kept[0]['id']}/register", headers=auth).json()
    assert (again["graph_id"], again["unknown_categories"]) == (v1["id"], "ignore")  # retrained on inputs read so
