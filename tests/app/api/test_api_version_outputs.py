"""``PUT /v1/models/{id}/outputs/{graph_id}``: a deployed model's own outputs on a later version of its graph, as its
pipeline feeds it that version. Outputs of a pipeline whose scaler was fitted once (as the audit carries the version)
confirm the carry, and the model's audits on that version say so; a pipeline that fits its scaler again on each
version feeds the model other inputs, and its outputs are refused naming that; above the nodes a registration reads,
they are kept and the first audit there compares them."""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from apihelp import assert_problem
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker
from test_api_model_versions import CHEAP, _run

from app.core.db.base import utcnow
from app.core.db.tables import Audit
from app.core.settings import Settings
from app.schedules.scheduler import tick
from app.supplied import fit as registration
from bind_core import Graph, TrainedModel
from bind_core.data.datasets import ingest_files
from bind_core.pipeline import InputSchema, carry_inputs
from bind_core.training.fit import TrainConfig, train

N = 64


def _table(seed: int, shift: float = 0.0) -> str:
    """Clients whose label leans on age and score; ``shift`` makes every client older (other ranges)."""
    rng = np.random.default_rng(seed)
    age, score = rng.uniform(20, 70, N) + shift, rng.normal(0, 2, N)
    label = ((age - shift - 45) / 10 + score + rng.normal(0, 0.5, N) > 0).astype(int)
    rows = [f"{i},{age[i]:.3f},{score[i]:.3f},{'fm'[i % 2]},{label[i]}" for i in range(N)]
    return "id,age,score,gender,label\n" + "\n".join(rows) + "\n"


EDGES = "".join(f"{i},{(i + 1) % N}\n{i},{(i + 7) % N}\n" for i in range(N))


def _read(tmp_path: Path, table: str) -> Graph:
    """The table as an upload reads it (scaled by its own ranges, the default)."""
    (tmp_path / "t.csv").write_text(table)
    (tmp_path / "e.csv").write_text(EDGES)
    read = ingest_files(tmp_path / "t.csv", tmp_path / "e.csv", label="label", sensitive="gender", node_id="id")
    return read.graph


def _upload(client: TestClient, auth: dict[str, str], table: str, name: str = "clients") -> str:
    response = client.post(
        "/v1/graphs",
        headers=auth,
        files={"nodes": ("t.csv", table.encode()), "edges": ("e.csv", EDGES.encode())},
        data={"label": "label", "sensitive": "gender", "node_id": "id", "name": name},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _npy(model: TrainedModel, graph: Graph) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, model.predict_proba(graph).numpy())
    return buffer.getvalue()


def _put(client: TestClient, auth: dict[str, str], model_id: str, graph_id: str, data: bytes):  # type: ignore[no-untyped-def]
    return client.put(f"/v1/models/{model_id}/outputs/{graph_id}", headers=auth, files={"outputs": ("out.npy", data)})


@pytest.fixture
def deployed(client: TestClient, auth: dict[str, str], tmp_path: Path) -> dict[str, Any]:
    """A model trained on version 1 as the upload scaled it, registered for it; version 2 uploaded (older clients:
    the upload scales it by its own ranges); the deployed pipeline's inputs on version 2 with its scaler fitted once
    (version 1's ranges, as the audit carries it) and fitted again (version 2's own)."""
    first, second = _table(1), _table(2, shift=6.0)
    v1, v2 = _upload(client, auth, first), _upload(client, auth, second)
    graph1, graph2 = _read(tmp_path, first), _read(tmp_path, second)
    torch.manual_seed(0)
    model = train(graph1, TrainConfig(epochs=60, polish=False))
    response = client.post(
        "/v1/models",
        headers=auth,
        files={"weights": ("m.safetensors", model.to_bytes())},
        data={"config": json.dumps(model.config_dict()), "graph_id": v1, "name": "credit"},
    )
    assert response.status_code == 201, response.text
    once, _ = carry_inputs(graph2, InputSchema.of(graph1))
    return {"model_id": response.json()["id"], "v1": v1, "v2": v2, "model": model, "once": once, "again": graph2}


def _audit(
    client: TestClient, auth: dict[str, str], sessions: sessionmaker[Session], settings: Settings, body: dict[str, Any]
) -> dict[str, Any]:
    queued = client.post("/v1/audits", headers=auth, json={**body, "stages": ["metrics"], "bootstrap": 0})
    assert queued.status_code == 202, queued.text
    return _run(client, auth, sessions, settings, queued.json()["id"])


def test_outputs_on_a_later_version_confirm_the_carry_or_name_a_scaler_fitted_again(
    client: TestClient,
    auth: dict[str, str],
    sessions: sessionmaker[Session],
    settings: Settings,
    deployed: dict[str, Any],
) -> None:
    model_id, v2, model = deployed["model_id"], deployed["v2"], deployed["model"]
    refused = _put(client, auth, model_id, v2, _npy(model, deployed["again"]))
    body = assert_problem(refused, 422, "outputs-differ")
    assert "a scaler or encoder fitted again on this version" in body["errors"][0]["message"], body

    kept = _put(client, auth, model_id, v2, _npy(model, deployed["once"]))
    assert kept.status_code == 200, kept.text
    said = kept.json()
    assert (said["graph_id"], said["graph_version"], said["outputs_name"]) == (v2, 2, "out.npy")
    assert said["match"]["matches"] is True and said["match"]["nodes"] == N
    listed = client.get(f"/v1/models/{model_id}/outputs", headers=auth).json()
    assert [item["graph_id"] for item in listed["items"]] == [v2] and listed["next_page_token"] is None

    audit = _audit(client, auth, sessions, settings, {"model_id": model_id, "graph_id": v2})
    assert audit["state"] == "succeeded", audit.get("error")
    supplied = audit["results"]["supplied_model"]
    assert supplied["carried"]["rescaled"] is True
    assert supplied["outputs"]["matches"] is True and supplied["training_fit"]["inputs_confirmed"] is True
    # a schedule's run on that version says so, in its history and its report
    schedule = client.post(
        "/v1/schedules", headers=auth, json={"model_id": model_id, "interval_seconds": 3600, "audit": CHEAP}
    ).json()
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.state == "queued").values(state="cancelled"))
    [slot] = tick(sessions, utcnow() + timedelta(seconds=1))
    assert _run(client, auth, sessions, settings, str(slot))["state"] == "succeeded"
    [run] = client.get(f"/v1/schedules/{schedule['id']}/runs", headers=auth).json()["items"]
    assert (run["graph_version"], run["inputs_confirmed"]) == (2, True)
    report = client.get(f"/v1/schedules/{schedule['id']}/report", headers=auth).text
    assert "inputs confirmed by the model&#39;s own outputs on this version" in report
    client.post(f"/v1/schedules/{schedule['id']}/pause", headers=auth)
    # on its own graph the registration's (none given): nothing to confirm
    first = _audit(client, auth, sessions, settings, {"model_id": model_id, "graph_id": deployed["v1"]})
    assert first["state"] == "succeeded" and first["results"]["supplied_model"].get("outputs") is None


def test_outputs_for_another_graph_or_model_are_refused(
    client: TestClient, auth: dict[str, str], deployed: dict[str, Any]
) -> None:
    other = _upload(client, auth, _table(3), name="elsewhere")
    data = _npy(deployed["model"], deployed["once"])
    refused = _put(client, auth, deployed["model_id"], other, data)
    body = assert_problem(refused, 422, "validation-error")
    assert body["errors"] == [
        {"field": "graph_id", "message": "not a version of 'clients', the graph the model was registered for"}
    ]
    assert_problem(_put(client, auth, str(uuid.uuid4()), deployed["v2"], data), 404, "model-not-found")
    assert_problem(_put(client, auth, deployed["model_id"], str(uuid.uuid4()), data), 404, "graph-not-found")
    bad = client.put(
        f"/v1/models/{deployed['model_id']}/outputs/{deployed['v2']}", headers=auth, files={"outputs": ("o.npy", b"x")}
    )
    assert assert_problem(bad, 422, "invalid-outputs")["errors"][0]["field"] == "outputs"


def test_above_the_nodes_a_registration_reads_the_first_audit_compares_them(
    client: TestClient,
    auth: dict[str, str],
    sessions: sessionmaker[Session],
    settings: Settings,
    deployed: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registration, "CHECK_MAX_NODES", N - 1)  # the version is "too large" to compare on upload
    model_id, v2, model = deployed["model_id"], deployed["v2"], deployed["model"]
    wrong = _put(client, auth, model_id, v2, _npy(model, deployed["again"]))
    assert wrong.status_code == 200 and wrong.json()["match"] is None, wrong.text
    failed = _audit(client, auth, sessions, settings, {"model_id": model_id, "graph_id": v2})
    assert failed["state"] == "failed" and failed["error"]["type"].endswith("/outputs-differ"), failed["error"]

    assert _put(client, auth, model_id, v2, _npy(model, deployed["once"])).json()["match"] is None
    audit = _audit(client, auth, sessions, settings, {"model_id": model_id, "graph_id": v2})
    assert audit["state"] == "succeeded", audit.get("error")
    assert audit["results"]["supplied_model"]["outputs"]["matches"] is True
    [item] = client.get(f"/v1/models/{model_id}/outputs", headers=auth).json()["items"]
    assert item["match"]["matches"] is True  # kept: later audits take it as found


def test_two_uploads_at_the_same_moment_are_a_conflict_not_an_error(
    client: TestClient, auth: dict[str, str], deployed: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second of two uploads for one version, whose replacement of the first races another's insert (simulated:
    its delete finds nothing to delete), is a 409 to send again, and the first stays kept."""
    from sqlalchemy import false

    from app.supplied import version_outputs

    model_id, v2, data = deployed["model_id"], deployed["v2"], _npy(deployed["model"], deployed["once"])
    assert _put(client, auth, model_id, v2, data).status_code == 200
    real = version_outputs.delete
    monkeypatch.setattr(version_outputs, "delete", lambda table: real(table).where(false()))
    assert_problem(_put(client, auth, model_id, v2, data), 409, "outputs-conflict")
    monkeypatch.undo()
    assert len(client.get(f"/v1/models/{model_id}/outputs", headers=auth).json()["items"]) == 1
