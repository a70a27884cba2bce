"""``POST /v1/models`` with the model's own ``outputs``: compared with the model as read on its graph; a model that
does not give them is refused with what most likely differs; one that does is registered with its inputs confirmed
(no doubt of a scaled upload), keeps the match through ``POST …/check``, and its audits say so."""

from __future__ import annotations

import io
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from apihelp import assert_problem, register_model, run_alone
from fastapi.testclient import TestClient
from safetensors.torch import save
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker
from torch_geometric.nn import GCN

from app.audits import run as runner
from app.core.db.tables import Audit
from app.core.settings import Settings
from app.supplied import fit as registration
from app.supplied.loading import confirmed_outputs
from bind_core.data.datasets import ingest_files
from bind_core.data.graph import Graph

N = 60
TABLE = "id,age,score,gender,label\n" + "".join(
    f"{i},{20 + i},{(i * 7) % 11},{'fm'[i % 2]},{int(i % 4 < 2)}\n" for i in range(N)
)
EDGES = "".join(f"{i},{(i + 1) % N}\n{i},{(i + 7) % N}\n" for i in range(N))


def _read(tmp_path: Path, scale: bool) -> Graph:
    (tmp_path / "t.csv").write_text(TABLE)
    (tmp_path / "e.csv").write_text(EDGES)
    return ingest_files(tmp_path / "t.csv", tmp_path / "e.csv", label="label", sensitive="gender", scale=scale).graph


def _trained(graph: Graph) -> tuple[GCN, bytes, dict[str, Any]]:
    torch.manual_seed(0)
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2}
    module = GCN(**args)
    optimizer = torch.optim.Adam(module.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(60):
        optimizer.zero_grad()
        F.cross_entropy(module(graph.x, graph.edge_index)[graph.train_idx], graph.y[graph.train_idx]).backward()
        optimizer.step()
    config = {"format": "torch_geometric", "class": "GCN", "args": args,
              "training": {"loss": "cross_entropy", "weight_decay": 5e-4, "epochs": 60}}  # fmt: skip
    return module.eval(), save({k: v.contiguous() for k, v in module.state_dict().items()}), config


def _npy(module: GCN, graph: Graph) -> bytes:
    buffer = io.BytesIO()
    with torch.no_grad():
        np.save(buffer, module(graph.x, graph.edge_index).log_softmax(1).numpy())
    return buffer.getvalue()


def _register(client: TestClient, auth: dict[str, str], graph_id: str, weights: bytes, config: dict[str, Any],
              outputs: tuple[str, bytes]):  # type: ignore[no-untyped-def]  # fmt: skip
    return register_model(client, auth, graph_id, weights, config, outputs=outputs)


def test_outputs_confirm_a_scaled_upload_or_refuse_a_model_fed_otherwise(
    client: TestClient,
    auth: dict[str, str],
    tmp_path: Path,
    sessions: sessionmaker[Session],
    settings: Settings,
) -> None:
    uploaded = client.post(
        "/v1/graphs",
        headers=auth,
        files={"nodes": ("t.csv", TABLE.encode()), "edges": ("e.csv", EDGES.encode())},
        data={"label": "label", "sensitive": "gender"},  # scaled to [-1, 1], the default
    )
    assert uploaded.status_code == 201, uploaded.text
    graph_id = uploaded.json()["id"]

    # a model trained on the table's own values, its outputs computed on them: not the model the upload feeds
    own = _read(tmp_path, scale=False)
    module, weights, config = _trained(own)
    refused = _register(client, auth, graph_id, weights, config, ("out.npy", _npy(module, own)))
    body = assert_problem(refused, 422, "outputs-differ")
    [error] = body["errors"]
    assert error["field"] == "outputs" and "scale=false" in error["message"], error
    assert body["outputs"]["matches"] is False and body["outputs"]["differing"] > 0

    # a model trained on the values as the upload scaled them, its outputs computed there: its inputs confirmed
    scaled = _read(tmp_path, scale=True)
    module, weights, config = _trained(scaled)
    registered = _register(client, auth, graph_id, weights, config, ("out.npy", _npy(module, scaled)))
    assert registered.status_code == 201, registered.text
    said = registered.json()
    assert said["fit"]["outputs"]["matches"] is True and said["fit"]["outputs"]["nodes"] == N
    assert said["fit"]["outputs"]["reading"] == "logits"
    assert "scaled_inputs" not in said["warning_codes"]
    assert said["fit"]["training_fit"]["inputs_confirmed"] is True
    model_id = said["id"]

    # read again, the match found at registration is kept (the outputs themselves are not)
    again = client.post(f"/v1/models/{model_id}/check", headers=auth)
    assert again.status_code == 200, again.text
    assert again.json()["fit"]["outputs"] == said["fit"]["outputs"]
    assert again.json()["warning_codes"] == said["warning_codes"]

    # the audit of it says so: no doubt of the scaled inputs, the match in its record
    queued = client.post("/v1/audits", headers=auth, json={"model_id": model_id, "stages": ["metrics"], "bootstrap": 0})
    assert queued.status_code == 202, queued.text
    audit_id = queued.json()["id"]
    status, audit = run_alone(client, auth, audit_id, sessions, settings)
    assert status == "succeeded", audit.get("error")
    supplied = audit["results"]["supplied_model"]
    assert supplied["outputs"]["matches"] is True
    assert supplied["training_fit"]["inputs_confirmed"] is True
    assert "scaled_inputs" not in audit["results"]["warning_codes"]
    report = client.get(f"/v1/audits/{audit_id}/report", headers=auth)
    assert report.status_code == 200 and f"outputs on {N} nodes were given with it" in report.text


def test_outputs_that_do_not_read_are_422_naming_the_part(
    client: TestClient, auth: dict[str, str], tmp_path: Path
) -> None:
    uploaded = client.post(
        "/v1/graphs",
        headers=auth,
        files={"nodes": ("t.csv", TABLE.encode()), "edges": ("e.csv", EDGES.encode())},
        data={"label": "label", "sensitive": "gender", "scale": "false"},
    )
    assert uploaded.status_code == 201, uploaded.text
    _, weights, config = _trained(_read(tmp_path, scale=False))
    for name, data, says in (
        ("out.pt", b"\x80\x04K\x01.", "neither .npy"),
        ("out.csv", b"id,a,b\n999,0.5,0.5\n", "not in this graph"),
        ("out.npy", b"not numpy", "not a numpy .npy file"),
    ):
        refused = _register(client, auth, uploaded.json()["id"], weights, config, (name, data))
        body = assert_problem(refused, 422, "invalid-outputs")
        assert body["errors"][0]["field"] == "outputs" and says in body["errors"][0]["message"], body


def test_the_consoles_model_choice_says_its_outputs_were_reproduced() -> None:
    from app.console.workbench import _model_choice
    from app.supplied.service import ModelChoice

    mid = uuid.uuid4()
    assert _model_choice(ModelChoice(mid, "gcn", 1, "refuse", [], True), version=1) == (
        "gcn (its own outputs reproduced when registered)"
    )
    assert _model_choice(ModelChoice(mid, "gcn", 1, "refuse", []), version=1) == "gcn"
    assert confirmed_outputs({"fit": {"outputs": {"matches": True}}}) == {"matches": True}
    assert confirmed_outputs({"fit": {"outputs": {"matches": False}}}) is None
    assert confirmed_outputs({"fit": None}) is None and confirmed_outputs(None) is None


def test_on_a_graph_too_large_to_read_the_outputs_are_kept_and_compared_by_its_first_audit(
    client: TestClient,
    auth: dict[str, str],
    tmp_path: Path,
    sessions: sessionmaker[Session],
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registration, "CHECK_MAX_NODES", 10)  # the graph is "too large" for a registration
    uploaded = client.post(
        "/v1/graphs",
        headers=auth,
        files={"nodes": ("t.csv", TABLE.encode()), "edges": ("e.csv", EDGES.encode())},
        data={"label": "label", "sensitive": "gender", "scale": "false"},
    )
    assert uploaded.status_code == 201, uploaded.text
    graph_id = uploaded.json()["id"]
    own = _read(tmp_path, scale=False)
    module, weights, config = _trained(own)

    def audit(model_id: str) -> dict[str, Any]:
        queued = client.post(
            "/v1/audits", headers=auth, json={"model_id": model_id, "stages": ["metrics"], "bootstrap": 0}
        )
        assert queued.status_code == 202, queued.text
        audit_id = queued.json()["id"]
        with sessions.begin() as session:
            session.execute(
                update(Audit).where(Audit.state == "queued", Audit.id != uuid.UUID(audit_id)).values(state="cancelled")
            )
        runner.execute(audit_id, sessions=sessions, settings=settings, device="cpu")
        return dict(client.get(f"/v1/audits/{audit_id}", headers=auth).json())

    # outputs of other nodes (rows reversed): kept at registration, the first audit fails saying so
    wrong = np.load(io.BytesIO(_npy(module, own)))[::-1].copy()
    buffer = io.BytesIO()
    np.save(buffer, wrong)
    said = _register(client, auth, graph_id, weights, config, ("out.npy", buffer.getvalue())).json()
    assert said["outputs_pending"] is True and said["fit"] is None and "outputs_pending" in said["fit_not_checked"]
    failed = audit(said["id"])
    assert failed["state"] == "failed" and failed["error"]["type"].endswith("/outputs-differ"), failed["error"]
    assert failed["error"]["outputs"]["reordered"] is True
    assert client.get(f"/v1/models/{said['id']}", headers=auth).json()["outputs_pending"] is True  # still pending

    # the right outputs: the first audit compares them, the registry keeps the match, later audits take it as found
    said = _register(client, auth, graph_id, weights, config, ("out.npy", _npy(module, own))).json()
    first = audit(said["id"])
    assert first["state"] == "succeeded", first.get("error")
    assert first["results"]["supplied_model"]["outputs"]["matches"] is True
    read = client.get(f"/v1/models/{said['id']}", headers=auth).json()
    assert read["outputs_pending"] is False and read["fit"]["outputs"]["matches"] is True
    again = client.post(f"/v1/models/{said['id']}/check", headers=auth).json()
    assert again["fit"]["outputs"] == read["fit"]["outputs"] and again["outputs_pending"] is False
    second = audit(said["id"])
    assert second["results"]["supplied_model"]["outputs"] == first["results"]["supplied_model"]["outputs"]
