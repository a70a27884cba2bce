"""``/v1/audits/{id}/models``: each debiasing budget's retrained model to take away (issue 34 item 7): listed with its
budget's headline, downloaded as safetensors and a config in the audited model's form, registered as a supplied
model that is then audited like any upload; errors, tenant isolation and pagination."""

from __future__ import annotations

import hashlib
import io
import json
import uuid
from typing import Any

import pytest
import torch
from apihelp import assert_problem, forge_token
from fastapi.testclient import TestClient
from safetensors.torch import load, save
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker
from torch_geometric.nn import GCN

from app.audits import run as runner
from app.audits.model_artifacts import store_model_artifact
from app.core.db.tables import Audit, Graph, ModelArtifact
from app.core.settings import Settings
from bind_core.codec import encode
from bind_core.data.datasets import load_npz
from bind_core.debiasing.debias import report
from bind_core.pipeline import weight_names
from bind_core.training.document import read_document
from bind_core.training.fit import TrainConfig, TrainedModel, train

torch.set_num_threads(1)

AFTER = {"accuracy": 0.8, "delta_sp": 0.1, "delta_eo": 0.2, "gamma": 0.15, "f1": 0.7}


def _rows(n: int) -> list[dict[str, Any]]:
    return [{"budget": i + 1, "deleted": i + 1, "after": {**AFTER, "gamma": 0.1 * i}} for i in range(n)]


def _succeeded(
    sessions: sessionmaker[Session], graph_id: str, n: int = 3, dataset: str | None = None
) -> tuple[uuid.UUID, uuid.UUID]:
    """A succeeded audit of ``graph_id``'s tenant, of that graph or of ``dataset``, with ``n`` debiasing rows; and the
    tenant."""
    with sessions.begin() as session:
        graph = session.get(Graph, uuid.UUID(graph_id))
        assert graph is not None
        source: dict[str, Any] = {"dataset": dataset} if dataset else {"graph_id": graph.id, "graph_version": 1}
        audit = Audit(tenant_id=graph.tenant_id, config={}, request_hash="0" * 64, state="succeeded",
                      results={"debiasing": _rows(n)}, **source)  # fmt: skip
        session.add(audit)
        session.flush()
        return audit.id, graph.tenant_id


def _keep(
    sessions: sessionmaker[Session], audit_id: uuid.UUID, tenant_id: uuid.UUID, models: list[TrainedModel], **kw: Any
) -> list[str]:
    ids = []
    with sessions.begin() as session:
        for i, model in enumerate(models):
            row = store_model_artifact(
                session, tenant_id=tenant_id, audit_id=audit_id, source="debias", index_or_id=i, model=model,
                max_bytes=kw.get("max_bytes", [10**7] * len(models))[i], form=kw.get("form"), names=kw.get("names"),
            )  # fmt: skip
            ids.append(str(row.id))
    return ids


@pytest.fixture
def trained(graph_npz: bytes) -> list[TrainedModel]:
    graph = load_npz(io.BytesIO(graph_npz))
    return [train(graph, TrainConfig(epochs=2 + i, polish=False)) for i in range(3)]


def test_list_pages_and_downloads(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session], trained: list
) -> None:
    audit_id, tenant = _succeeded(sessions, graph_id)
    ids = _keep(sessions, audit_id, tenant, trained, max_bytes=[10**7, 10**7, 10])  # the third over the cap
    base = f"/v1/audits/{audit_id}/models"
    first = client.get(base, headers=auth, params={"limit": 2}).json()
    second = client.get(base, headers=auth, params={"limit": 2, "page_token": first["next_page_token"]}).json()
    assert second["next_page_token"] is None
    items = first["items"] + second["items"]
    assert [m["id"] for m in items] == ids and [m["budget_index"] for m in items] == [0, 1, 2]
    assert [(m["budget"], m["deleted"]) for m in items] == [(1, 1), (2, 2), (3, 3)]
    assert items[1]["after"] == {"accuracy": 0.8, "delta_sp": 0.1, "delta_eo": 0.2, "gamma": 0.1}
    assert items[0]["form"] == "bind-audit/model@1" and items[0]["weights_kept"] is True
    assert items[0]["links"]["weights"] == f"{base}/{ids[0]}/weights"

    weights = client.get(items[0]["links"]["weights"], headers=auth)
    assert weights.status_code == 200 and weights.headers["content-type"] == "application/octet-stream"
    assert weights.content == trained[0].to_bytes()
    assert hashlib.sha256(weights.content).hexdigest() == items[0]["sha256"] == weights.headers["etag"].strip('"')
    assert f'filename="audit-{audit_id}-budget-0.safetensors"' in weights.headers["content-disposition"]
    again = client.get(items[0]["links"]["weights"], headers={**auth, "If-None-Match": weights.headers["etag"]})
    assert again.status_code == 304 and not again.content
    config = client.get(items[0]["links"]["config"], headers=auth).json()
    assert TrainedModel.from_bytes(weights.content, config).model_config == trained[0].model_config

    capped = items[2]
    assert capped["weights_kept"] is False and capped["links"]["weights"] is None and "10-byte" in capped["note"]
    problem = assert_problem(client.get(f"{base}/{ids[2]}/weights", headers=auth), 409, "weights-not-kept")
    assert "BIND_MODEL_ARTIFACT_MAX_BYTES" in problem["detail"]
    assert client.get(f"{base}/{ids[2]}/config", headers=auth).json()["format"] == "bind-audit/model@1"
    assert_problem(client.post(f"{base}/{ids[2]}/register", headers=auth), 409, "weights-not-kept")


def test_errors_and_tenant_isolation(
    client: TestClient,
    auth: dict[str, str],
    other_auth: dict[str, str],
    graph_id: str,
    sessions: sessionmaker[Session],
    trained: list,
) -> None:
    audit_id, tenant = _succeeded(sessions, graph_id)
    [model_id] = _keep(sessions, audit_id, tenant, trained[:1])
    base = f"/v1/audits/{audit_id}/models"
    for method, path in (("GET", base), ("GET", f"{base}/{model_id}/weights"), ("GET", f"{base}/{model_id}/config"),
                         ("POST", f"{base}/{model_id}/register")):  # fmt: skip
        assert_problem(client.request(method, path, headers=other_auth), 404, "audit-not-found")
    assert_problem(client.get(f"/v1/audits/{uuid.uuid4()}/models", headers=auth), 404, "audit-not-found")
    assert_problem(client.get(f"{base}/{uuid.uuid4()}/config", headers=auth), 404, "audit-model-not-found")
    # a model of another audit of the same tenant is not this audit's
    other_audit, _ = _succeeded(sessions, graph_id)
    other_path = f"/v1/audits/{other_audit}/models/{model_id}/weights"
    assert_problem(client.get(other_path, headers=auth), 404, "audit-model-not-found")
    assert_problem(client.get(f"/v1/audits/{other_audit}/models", headers=auth), 409, "models-not-kept")
    bad = forge_token("audit-models", [["x"], 0, "not-a-uuid"])
    assert_problem(client.get(base, headers=auth, params={"page_token": bad}), 400, "invalid-page-token")
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == audit_id).values(state="running"))
    assert_problem(client.get(base, headers=auth), 409, "audit-not-succeeded")
    assert_problem(client.get(f"{base}/{model_id}/weights", headers=auth), 409, "audit-not-succeeded")


def test_a_dataset_audits_model_cannot_be_registered_but_downloads(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session], trained: list
) -> None:
    audit_id, tenant = _succeeded(sessions, graph_id, n=1, dataset="synthetic")
    model = trained[0]
    [model_id] = _keep(sessions, audit_id, tenant, [model])
    path = f"/v1/audits/{audit_id}/models/{model_id}"
    assert_problem(client.post(f"{path}/register", headers=auth), 409, "audit-has-no-graph")
    assert client.get(f"{path}/weights", headers=auth).content == model.to_bytes()


def test_registered_model_is_audited_like_any_upload(
    client: TestClient,
    auth: dict[str, str],
    graph_id: str,
    graph_npz: bytes,
    sessions: sessionmaker[Session],
    settings: Settings,
    trained: list,
) -> None:
    audit_id, tenant = _succeeded(sessions, graph_id)
    [model_id] = _keep(sessions, audit_id, tenant, trained[2:])
    registered = client.post(f"/v1/audits/{audit_id}/models/{model_id}/register", headers=auth, json={"name": "mine"})
    assert registered.status_code == 201, registered.text
    supplied = registered.json()
    assert registered.headers["Location"] == f"/v1/models/{supplied['id']}"
    assert (supplied["graph_id"], supplied["name"]) == (graph_id, "mine")
    read = client.get(registered.headers["Location"], headers=auth).json()
    assert read["size_bytes"] == len(trained[2].to_bytes())
    # read on its graph as an uploaded model's registration reads it (the retraining fits its training nodes)
    assert read["fit_not_checked"] is None and read["fit"]["training_fit"]["no_better"] is False
    default = client.post(f"/v1/audits/{audit_id}/models/{model_id}/register", headers=auth)
    assert default.status_code == 201 and "budget 1 (1 nodes deleted)" in default.json()["name"]

    body = {"model_id": supplied["id"], "budgets": [1], "validation_sample": 0, "bootstrap": 0}
    queued = client.post("/v1/audits", headers=auth, json=body)
    assert queued.status_code == 202, queued.text
    with sessions.begin() as session:  # the worker takes the audit whose turn it is: set the others aside
        others = (Audit.state == "queued", Audit.id != uuid.UUID(queued.json()["id"]))
        session.execute(update(Audit).where(*others).values(state="cancelled"))
    outcome = runner.execute(queued.json()["id"], sessions=sessions, settings=settings, device="cpu")
    audit = client.get(f"/v1/audits/{queued.json()['id']}", headers=auth).json()
    assert outcome.status == "succeeded", audit.get("error")
    expected = report(trained[2], load_npz(io.BytesIO(graph_npz)))  # the retrained model's own metrics
    for key in ("accuracy", "gamma"):
        assert audit["results"]["metrics"]["test"][key] == pytest.approx(getattr(expected, key), abs=1e-6), key
    # and that audit keeps its own budget's retrained model, in the registered model's form
    kept = client.get(f"/v1/audits/{queued.json()['id']}/models", headers=auth).json()["items"]
    assert [(m["budget_index"], m["form"], m["weights_kept"]) for m in kept] == [(0, "bind-audit/model@1", True)]


def test_a_pyg_models_retrained_weights_register_in_the_pyg_form(
    client: TestClient, auth: dict[str, str], graph_id: str, graph_npz: bytes, sessions: sessionmaker[Session]
) -> None:
    graph = load_npz(io.BytesIO(graph_npz))
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2}
    torch.manual_seed(0)
    supplied_weights = save({k: v.contiguous() for k, v in GCN(**args).state_dict().items()})
    pyg_config = {"format": "torch_geometric", "class": "GCN", "args": args,
                  "training": {"loss": "cross_entropy", "weight_decay": 5e-4, "epochs": 3}}  # fmt: skip
    canonical = encode(read_document(pyg_config))
    retrained = TrainedModel.from_bytes(supplied_weights, canonical)
    audit_id, tenant = _succeeded(sessions, graph_id, n=1)
    [model_id] = _keep(sessions, audit_id, tenant, [retrained], form=canonical, names=weight_names(supplied_weights))
    path = f"/v1/audits/{audit_id}/models/{model_id}"
    config = client.get(f"{path}/config", headers=auth).json()
    assert (config["format"], config["class"]) == ("torch_geometric", "GCN")
    assert args.items() <= config["args"].items()  # the user's arguments (with PyG's defaults filled in)
    weights = client.get(f"{path}/weights", headers=auth).content
    assert sorted(load(weights)) == sorted(load(supplied_weights))  # PyG's own names
    registered = client.post(f"{path}/register", headers=auth)
    assert registered.status_code == 201, registered.text
    stored = client.get(registered.headers["Location"], headers=auth).json()
    assert stored["config"]["source"]["class"] == "GCN" and stored["size_bytes"] == len(weights)


def test_erasing_the_audit_erases_its_models(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session], trained: list
) -> None:
    audit_id, tenant = _succeeded(sessions, graph_id, n=1)
    _keep(sessions, audit_id, tenant, trained[:1])
    assert client.delete(f"/v1/audits/{audit_id}", headers=auth).status_code == 204
    with sessions() as session:
        left = session.scalar(select(func.count()).where(ModelArtifact.audit_id == audit_id))
    assert left == 0


def test_a_what_ifs_model_is_kept_the_same_way_after_the_budgets(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session], trained: list
) -> None:
    audit_id, tenant = _succeeded(sessions, graph_id, n=1)
    what_if = uuid.uuid4()
    with sessions.begin() as session:
        store_model_artifact(session, tenant_id=tenant, audit_id=audit_id, source="what_if", index_or_id=what_if,
                             model=trained[1], max_bytes=10**7)  # fmt: skip
        with pytest.raises(ValueError, match="budget index"):
            store_model_artifact(session, tenant_id=tenant, audit_id=audit_id, source="debias", index_or_id=what_if,
                                 model=trained[1], max_bytes=10**7)  # fmt: skip
    _keep(sessions, audit_id, tenant, trained[:1])
    items = client.get(f"/v1/audits/{audit_id}/models", headers=auth).json()["items"]
    assert [(m["source"], m["budget_index"], m["what_if_id"]) for m in items] == [
        ("debias", 0, None), ("what_if", None, str(what_if))]  # fmt: skip
    assert items[1]["budget"] is None and items[1]["after"] is None
    weights = client.get(items[1]["links"]["weights"], headers=auth)
    assert weights.content == trained[1].to_bytes() and f"what-if-{what_if}" in weights.headers["content-disposition"]


def test_an_audit_of_a_supplied_pyg_model_keeps_its_budgets_models_in_the_pyg_form(
    client: TestClient,
    auth: dict[str, str],
    graph_id: str,
    graph_npz: bytes,
    sessions: sessionmaker[Session],
    settings: Settings,
) -> None:
    graph = load_npz(io.BytesIO(graph_npz))
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2}
    torch.manual_seed(0)
    pyg = GCN(**args)
    uploaded = save({k: v.contiguous() for k, v in pyg.state_dict().items()})
    config = {"format": "torch_geometric", "class": "GCN", "args": args,
              "training": {"loss": "cross_entropy", "weight_decay": 5e-4, "epochs": 20, "lr": 0.01}}  # fmt: skip
    registered = client.post("/v1/models", headers=auth, files={"weights": ("gcn.safetensors", uploaded)},
                             data={"config": json.dumps(config), "graph_id": graph_id})  # fmt: skip
    assert registered.status_code == 201, registered.text
    body = {"model_id": registered.json()["id"], "budgets": [2, 5], "validation_sample": 0, "bootstrap": 0}
    queued = client.post("/v1/audits", headers=auth, json=body)
    assert queued.status_code == 202, queued.text
    with sessions.begin() as session:  # the worker takes the audit whose turn it is: set the others aside
        others = (Audit.state == "queued", Audit.id != uuid.UUID(queued.json()["id"]))
        session.execute(update(Audit).where(*others).values(state="cancelled"))
    outcome = runner.execute(queued.json()["id"], sessions=sessions, settings=settings, device="cpu")
    assert outcome.status == "succeeded"

    items = client.get(f"/v1/audits/{queued.json()['id']}/models", headers=auth).json()["items"]
    rows = client.get(f"/v1/audits/{queued.json()['id']}", headers=auth).json()["results"]["debiasing"]
    assert [(m["budget_index"], m["deleted"], m["form"]) for m in items] == [
        (i, row["deleted"], "torch_geometric") for i, row in enumerate(rows)]  # fmt: skip
    assert len(items) == 2 and items[0]["after"]["gamma"] == rows[0]["after"]["gamma"]
    for item in items:
        weights = client.get(item["links"]["weights"], headers=auth).content
        assert sorted(load(weights)) == sorted(load(uploaded))  # the user's parameter names
        theirs = GCN(**args)
        theirs.load_state_dict(load(weights), strict=True)  # PyG takes them as they are
        kept = client.get(item["links"]["config"], headers=auth).json()
        assert kept["class"] == "GCN" and kept["training"]["epochs"] == 20 and kept["training"]["lr"] == 0.01
    retrained, given = load(client.get(items[0]["links"]["weights"], headers=auth).content), load(uploaded)
    assert not all(torch.equal(retrained[k], given[k].to(retrained[k].dtype)) for k in given)  # retrained
    again = client.post(items[0]["links"]["register"], headers=auth)
    assert again.status_code == 201, again.text
